// Package mailbox is a protoactor mailbox in which the messages a
// predicate picks are handled before the other user messages queued
// ahead of them: a lane at the front.
//
// Why: an actor that does heavy work for one kind of message and answers
// quick questions of another keeps both in one FIFO queue under
// protoactor's default mailbox, so a question waits behind every heavy
// message queued before it. The ledger is such an actor: peers' ops
// arrive faster than it applies them during a burst of claims or the heal
// of a partition (a node of fifty on two cores was seconds behind), and
// the admin API's reads, /api/health's liveness question (2 s bound) and
// the /metrics scrape (1 s) waited for the whole backlog. A liveness
// probe that fails because the node is busy catching up gets it
// restarted by its orchestrator, to catch up again.
//
// The lane reorders only what the predicate picks, and only ahead of
// messages still queued: the message being handled finishes first, and
// the actor sees the front messages in their own arrival order, the
// others in theirs. A question that overtakes queued messages sees the
// state before them, which is what it would have seen had it come a
// moment earlier; anything its own sender was answered for was handled
// before the question was sent, so a client still reads its writes.
// Pick questions that do not change the actor's state, and requests
// whose effect does not depend on their order against the messages they
// may overtake (the ledger's own claims against other writers' ops).
//
// The lane is ahead, not alone: while other user messages wait, at most
// Streak front messages are handled in a row before one of them, so a
// flood of questions (a script polling the admin API in a loop) slows
// the actor's other work by at most that ratio and never stops it.
//
// System messages (stop, restart, watch) come first, and a suspended
// mailbox holds user messages, as in protoactor's default mailbox. Each
// run handles at most the dispatcher's Throughput of messages before it
// yields the goroutine (runtime.Gosched), as the default does.
// MessageBatch is not unpacked (no actor given this mailbox is sent
// one).
//
// It does not depend on the machine: one lock taken per message posted
// and handled, as the default mailbox's ring buffer takes one; the
// actors given it handle thousands of messages a second, not millions.
package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Producer returns a mailbox producer (actor.WithMailbox) whose mailboxes
// handle the user messages first reports true for before the others.
// first gets the message itself (a request's envelope unwrapped).
func Producer(first func(msg any) bool) actor.MailboxProducer {
	return func() actor.Mailbox { return &box{first: first} }
}

// Streak is how many front messages are handled in a row while other
// user messages wait.
const Streak = 4

const (
	idle int32 = iota
	running
)

type box struct {
	first func(any) bool

	mu     sync.Mutex
	system fifo
	front  fifo
	user   fifo

	status    atomic.Int32
	pending   atomic.Int32 // user messages queued (front and user)
	sysQueued atomic.Int32
	suspended atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
}

func (b *box) PostUserMessage(msg any) {
	inner := msg
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		inner = env.Message
	}
	lane := &b.user
	if b.first(inner) {
		lane = &b.front
	}
	b.mu.Lock()
	lane.push(msg)
	b.pending.Add(1)
	b.mu.Unlock()
	b.schedule()
}

func (b *box) PostSystemMessage(msg any) {
	b.mu.Lock()
	b.system.push(msg)
	b.sysQueued.Add(1)
	b.mu.Unlock()
	b.schedule()
}

func (b *box) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	b.invoker, b.dispatcher = invoker, dispatcher
}

func (b *box) Start() {}

func (b *box) UserMessageCount() int { return int(b.pending.Load()) }

func (b *box) schedule() {
	if b.status.CompareAndSwap(idle, running) {
		b.dispatcher.Schedule(b.process)
	}
}

// process runs the queue until it is empty, then goes idle; a message
// posted between the last pop and going idle schedules it again (here or
// by its poster, whichever wins the swap). The counts change with the
// queues, under the lock, so they never read below what is queued.
func (b *box) process() {
	for {
		b.run()
		b.status.Store(idle)
		if b.sysQueued.Load() == 0 && (b.suspended.Load() || b.pending.Load() == 0) {
			return
		}
		if !b.status.CompareAndSwap(idle, running) {
			return
		}
	}
}

func (b *box) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			b.invoker.EscalateFailure(r, msg)
		}
	}()
	n, limit, streak := 0, b.dispatcher.Throughput(), 0
	for {
		if n > limit {
			n = 0
			runtime.Gosched()
		}
		n++
		b.mu.Lock()
		msg = b.system.pop()
		if msg != nil {
			b.sysQueued.Add(-1)
		}
		b.mu.Unlock()
		if msg != nil {
			switch msg.(type) {
			case *actor.SuspendMailbox:
				b.suspended.Store(true)
			case *actor.ResumeMailbox:
				b.suspended.Store(false)
			default:
				b.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if b.suspended.Load() {
			return
		}
		b.mu.Lock()
		msg = nil
		if streak < Streak || b.user.empty() {
			msg = b.front.pop()
		}
		if msg != nil {
			streak++
		} else {
			msg, streak = b.user.pop(), 0
		}
		if msg != nil {
			b.pending.Add(-1)
		}
		b.mu.Unlock()
		if msg == nil {
			return
		}
		b.invoker.InvokeUserMessage(msg)
	}
}

// fifo is a queue on a slice, reused once drained; a queue that never
// drains moves its live part to the front when the slice is full and at
// least half of it was popped, so it does not grow without bound.
type fifo struct {
	items []any
	head  int
}

func (q *fifo) push(v any) {
	if len(q.items) == cap(q.items) && q.head > 0 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
}

func (q *fifo) empty() bool { return q.head == len(q.items) }

func (q *fifo) pop() any {
	if q.head == len(q.items) {
		return nil
	}
	v := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}
