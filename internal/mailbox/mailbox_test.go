package mailbox

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/stack"
	"peerdns/internal/testutil"
)

// work is a message that takes a while; question one to answer first.
type (
	work     struct{ n int }
	question struct{ n int }
	boom     struct{}
)

func isQuestion(msg any) bool {
	_, ok := msg.(*question)
	return ok
}

// recorder records the order it handled messages in; the first work
// message waits until release is closed, so the rest queue behind it.
type recorder struct {
	mu       sync.Mutex
	order    []string
	started  chan struct{}
	release  chan struct{}
	restarts int
}

func (r *recorder) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Restarting:
		r.mu.Lock()
		r.restarts++
		r.mu.Unlock()
	case *work:
		if m.n == 0 {
			close(r.started)
			<-r.release
		}
		r.log(fmt.Sprintf("w%d", m.n))
	case *question:
		r.log(fmt.Sprintf("q%d", m.n))
		if c.Sender() != nil {
			c.Respond(m.n)
		}
	case *boom:
		panic("boom")
	}
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	r.order = append(r.order, s)
	r.mu.Unlock()
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// handledInOrder waits until the recorder has handled exactly want, in
// that order.
func (r *recorder) handledInOrder(t *testing.T, want []string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := r.seen(); !slices.Equal(got, want) {
			return fmt.Errorf("handled %v, want %v", got, want)
		}
		return nil
	})
}

func spawn(t *testing.T) (*actor.ActorSystem, *actor.PID, *recorder) {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	rec := &recorder{started: make(chan struct{}), release: make(chan struct{})}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec },
		actor.WithMailbox(Producer(isQuestion)), actor.WithDispatcher(stack.Actors)))
	return sys, pid, rec
}

// Questions posted behind queued work are handled before it, after the
// message in hand; each lane keeps its own order; a request's envelope
// is looked into, and its reply comes back.
func TestQuestionsOvertakeQueuedWork(t *testing.T) {
	sys, pid, rec := spawn(t)
	sys.Root.Send(pid, &work{0})
	<-rec.started // w0 is being handled: everything below queues
	for i := 1; i <= 3; i++ {
		sys.Root.Send(pid, &work{i})
	}
	sys.Root.Send(pid, &question{1})
	fut := sys.Root.RequestFuture(pid, &question{2}, 10*time.Second)
	sys.Root.Send(pid, &work{4})
	close(rec.release)
	got, err := fut.Result()
	if err != nil || got != 2 {
		t.Fatalf("reply %v, %v; want 2", got, err)
	}
	want := []string{"w0", "q1", "q2", "w1", "w2", "w3", "w4"}
	rec.handledInOrder(t, want)
}

// A flood of questions does not stop the other work: while work waits,
// at most Streak questions go in a row before one piece of it.
func TestQuestionsDoNotStarveWork(t *testing.T) {
	sys, pid, rec := spawn(t)
	sys.Root.Send(pid, &work{0})
	<-rec.started
	const questions, works = 40, 5
	for i := 1; i <= questions; i++ {
		sys.Root.Send(pid, &question{i})
	}
	for i := 1; i <= works; i++ {
		sys.Root.Send(pid, &work{i})
	}
	close(rec.release)
	var want []string
	q := 1
	for w := 1; w <= works; w++ {
		for range Streak {
			want = append(want, fmt.Sprintf("q%d", q))
			q++
		}
		want = append(want, fmt.Sprintf("w%d", w))
	}
	for ; q <= questions; q++ {
		want = append(want, fmt.Sprintf("q%d", q))
	}
	want = append([]string{"w0"}, want...)
	rec.handledInOrder(t, want)
}

// Many posters at once: every message is handled exactly once, and the
// mailbox goes idle and wakes again without losing one (the race between
// going idle and a new post).
func TestEveryMessageHandledOnce(t *testing.T) {
	sys, pid, rec := spawn(t)
	close(rec.release)
	sys.Root.Send(pid, &work{0})
	const posters, each = 8, 2000
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 1 + p*each + i
				if i%3 == 0 {
					sys.Root.Send(pid, &question{n})
				} else {
					sys.Root.Send(pid, &work{n})
				}
			}
		}()
	}
	wg.Wait()
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := len(rec.seen()); n < posters*each+1 {
			return fmt.Errorf("%d of %d handled", n, posters*each+1)
		}
		return nil
	})
	seen := map[string]int{}
	for _, s := range rec.seen() {
		seen[s]++
	}
	for s, n := range seen {
		if n != 1 {
			t.Fatalf("%s handled %d times", s, n)
		}
	}
	if len(seen) != posters*each+1 {
		t.Fatalf("%d distinct messages handled, want %d", len(seen), posters*each+1)
	}
}

// A panic goes to the supervisor as with the default mailbox: the actor
// restarts and handles what was queued after the failing message.
func TestPanicEscalatesAndTheRestIsHandled(t *testing.T) {
	sys, pid, rec := spawn(t)
	close(rec.release)
	sys.Root.Send(pid, &work{0})
	sys.Root.Send(pid, &boom{})
	sys.Root.Send(pid, &work{1})
	got, err := sys.Root.RequestFuture(pid, &question{7}, 10*time.Second).Result()
	if err != nil || got != 7 {
		t.Fatalf("reply after the panic: %v, %v", got, err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := rec.seen(); !slices.Contains(got, "w1") {
			return fmt.Errorf("handled %v; w1 never", got)
		}
		return nil
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.restarts != 1 {
		t.Fatalf("%d restarts, want 1", rec.restarts)
	}
}

// A queue that never drains (ten always waiting) keeps its slice
// bounded by its backlog, and its order.
func TestFifoDoesNotGrowWithoutDraining(t *testing.T) {
	var q fifo
	for i := range 10 {
		q.push(i)
	}
	for i := range 1_000_000 {
		q.push(10 + i)
		if got := q.pop(); got != i {
			t.Fatalf("popped %v, want %d", got, i)
		}
	}
	if cap(q.items) > 64 {
		t.Fatalf("capacity %d for a backlog of %d", cap(q.items), len(q.items)-q.head)
	}
}
