package consensus

import (
	"crypto/sha256"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"
)

// refReplicas is the replica set written the slow, obvious way: every
// writer's distance as a big integer, a full sort, the first r.
func refReplicas(network, domain string, writers []string, r int) map[string]bool {
	if len(writers) <= r {
		return nil
	}
	h := func(s string) *big.Int {
		d := sha256.Sum256([]byte(network + "\x00" + s))
		return new(big.Int).SetBytes(d[:])
	}
	target := h(domain)
	type c struct {
		d  *big.Int
		id string
	}
	cs := make([]c, len(writers))
	for i, w := range writers {
		cs[i] = c{new(big.Int).Xor(h(w), target), w}
	}
	sort.Slice(cs, func(i, j int) bool {
		if x := cs[i].d.Cmp(cs[j].d); x != 0 {
			return x < 0
		}
		return cs[i].id < cs[j].id
	})
	out := map[string]bool{}
	for _, x := range cs[:r] {
		out[x.id] = true
	}
	return out
}

func writerIDs(n int, r *rand.Rand) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
	}
	return ids
}

func TestReplicasMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		n := 1 + r.IntN(120)
		rr := 1 + r.IntN(30)
		ids := writerIDs(n, r)
		m := NewMembership("net-"+fmt.Sprint(i%7), ids, rr)
		for k := range 5 {
			domain := fmt.Sprintf("d%d-%d.p2p", i, k)
			got, want := m.Replicas(domain), refReplicas("net-"+fmt.Sprint(i%7), domain, ids, rr)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d: Replicas(%q) with %d writers, R=%d\n got %v\nwant %v", i, domain, n, rr, got, want)
			}
			if n > rr && len(got) != rr {
				t.Fatalf("case %d: %d replicas, want R=%d", i, len(got), rr)
			}
		}
	}
}

// A pick served from the cache is the pick computed afresh, also after
// the cache filled and started over, and from several goroutines at once.
func TestReplicasCachedMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	ids := writerIDs(60, r)
	m := NewMembership("net", ids, 24)
	domains := maxPicks + 100
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range domains {
				d := fmt.Sprintf("name%d.p2p", (k*7+g)%domains)
				if got := m.Replicas(d); !reflect.DeepEqual(got, refReplicas("net", d, ids, 24)) {
					errs <- fmt.Sprintf("Replicas(%q) = %v, not the reference", d, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	m.mu.Lock()
	n := len(m.picks)
	m.mu.Unlock()
	if n == 0 || n > maxPicks {
		t.Fatalf("cache holds %d picks, want 1..%d", n, maxPicks)
	}
}

func TestReplicasIgnoreWriterOrderAndDependOnNetwork(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ids := writerIDs(100, r)
	shuffled := append([]string(nil), ids...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	a, b := NewMembership("net", ids, 24), NewMembership("net", shuffled, 24)
	other := NewMembership("another-net", ids, 24)
	differs := 0
	for k := range 50 {
		d := fmt.Sprintf("name%d.p2p", k)
		if !reflect.DeepEqual(a.Replicas(d), b.Replicas(d)) {
			t.Fatalf("Replicas(%q) depends on the order writers were listed in", d)
		}
		if !reflect.DeepEqual(a.Replicas(d), other.Replicas(d)) {
			differs++
		}
	}
	if differs == 0 {
		t.Fatal("the network id does not change any replica set: the salt is not used")
	}
}

// Up to R writers the rules are today's exactly: no replica set, and
// Restrict leaves the input alone.
func TestUpToRNothingChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	m := NewMembership("net", writerIDs(DefaultReplicas, r), 0)
	if m.Sparse() || m.Replicas("x.p2p") != nil {
		t.Fatalf("%d writers with R=%d: replica set %v, want none", m.Size(), DefaultReplicas, m.Replicas("x.p2p"))
	}
	for i := range 10_000 {
		in := randomInput(r)
		if got, want := Compute(Restrict(in, nil)), Compute(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: Restrict(nil) changed Compute: %+v, want %+v", i, got, want)
		}
	}
}

// Beyond R: the replica set's quorum is the reference rules applied to
// the active replicas alone, and a writer outside the set never votes.
func TestReplicaQuorumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 100_000 {
		in := randomInput(r)
		// A replica set of a random subset of the ids randomInput uses.
		reps := map[string]bool{}
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			if r.IntN(2) == 0 {
				reps[id] = true
			}
		}
		ref := in
		ref.Active = map[string]bool{}
		for id := range in.Active {
			if reps[id] {
				ref.Active[id] = true
			}
		}
		got, want := Compute(Restrict(in, reps)), refCompute(ref)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: Compute(Restrict(%+v, %v))\n got %+v\nwant %+v", i, in, reps, got, want)
		}
		if got.ActivePeers != len(ref.Active) || got.MinVotes != len(ref.Active)/2+1 {
			t.Fatalf("case %d: activePeers %d minVotes %d, want the replica set's %d", i, got.ActivePeers, got.MinVotes, len(ref.Active))
		}
		for _, self := range []string{"a", "c", "f"} {
			plan := AutoVote(self, Restrict(in, reps))
			want := VotePlan{}
			if reps[self] {
				want = refAutoVote(self, in)
			}
			if !reflect.DeepEqual(plan, want) {
				t.Fatalf("case %d: AutoVote(%s) in replica set %v = %+v, want %+v", i, self, reps, plan, want)
			}
		}
	}
}

func BenchmarkReplicas1000(b *testing.B) {
	m := NewMembership("net", writerIDs(1000, rand.New(rand.NewPCG(1, 1))), 24)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Replicas(fmt.Sprintf("d%d.p2p", i))
		i++
	}
}
