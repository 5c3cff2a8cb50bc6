package scale

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"peerdns/actors/consensus"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// A frozen writer: its process hangs, its connections stay open and
// nothing it would send leaves it. frozenConn stands for that on the
// in-memory transport: once the node's endpoint is frozen, Send drops
// the frame (and says it went); receiving goes on, as a hung process's
// kernel still takes packets.
type frozenConn struct {
	transport.Conn
	frozen *atomic.Bool
}

func (c *frozenConn) Send(m *messages.Envelope) error {
	if c.frozen.Load() {
		return nil
	}
	return c.Conn.Send(m)
}

// wrap makes c freezable with its endpoint.
func (e *linkedEndpoint) wrap(c transport.Conn) transport.Conn {
	return &frozenConn{Conn: c, frozen: &e.frozen}
}

// freezeOut freezes a writer that votes on domain (one of its replica
// set beyond R writers, any writer but node 0 up to R) and returns how
// long until every other node's consensus on domain counts one active
// peer fewer than before, on how many nodes, and the suspicion bytes
// each node received for the failure (counted until 5 s after the last
// node counted it out).
func (s *sim) freezeOut(domain string, within time.Duration) (time.Duration, int, float64) {
	root := s.nodes[0]
	netw := ask[*messages.GetNetworkReply](s.tb, root, root.ledger, &messages.GetNetwork{})
	ids := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		ids[i] = n.id.ID()
	}
	replicas := consensus.NewMembership(netw.Key, ids, consensus.DefaultReplicas).Replicas(domain)
	victim := s.nodes[len(s.nodes)-1]
	for _, n := range s.nodes[1:] {
		if replicas == nil || replicas[n.id.ID()] {
			victim = n
			break
		}
	}
	active := func(i int) (int, error) {
		n := s.nodes[i]
		for _, d := range ask[*messages.GetDomainsReply](s.tb, n, n.ledger, &messages.GetDomains{}).Domains {
			if d.Domain == domain && d.ConsensusState != nil {
				return d.ConsensusState.ActivePeers, nil
			}
		}
		return 0, fmt.Errorf("node %d has no consensus state for %s", i, domain)
	}
	// Every node counts every voter first (the whole network up to R,
	// the replica set beyond).
	full := min(len(s.nodes), consensus.DefaultReplicas)
	// A node that still counts a live writer out a minute after the
	// burst (its quorum smaller than its neighbours') is a defect: the
	// freeze is then not measured, and the caller reports why.
	before := make([]int, len(s.nodes))
	deadline := time.Now().Add(within)
	for i := 0; i < len(s.nodes); {
		a, err := active(i)
		if err != nil {
			s.tb.Fatal(err)
		}
		if a >= full {
			before[i] = a
			i++
			continue
		}
		if time.Now().After(deadline) {
			s.tb.Logf("freeze not measured: node %d counts %d of %d voters of %s active %v after the burst", i, a, full, domain, within)
			return -1, 0, 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	t0, m0 := time.Now(), s.meter.snapshot()
	victim.ep.frozen.Store(true)
	// Each node is asked until it counts the victim out, and its time
	// is when that was first seen: the figure is the last node's, read
	// to within one look (outEvery and Eventually's pause, 15 ms of
	// virtual time; a look costs real CPU only, as virtual time stands
	// still while the nodes answer).
	outAt := make([]time.Duration, len(s.nodes))
	seen := make([]bool, len(s.nodes))
	testutil.Eventually(s.tb, within, func() error {
		var late []string
		for i := range s.nodes {
			if i == victim.i || seen[i] {
				continue
			}
			a, err := active(i)
			if err != nil {
				return err
			}
			if a < before[i] {
				outAt[i], seen[i] = time.Since(t0), true
				continue
			}
			if len(late) == 0 {
				d := ask[*messages.PeerDiagnosticsReply](s.tb, s.nodes[i], s.nodes[i].peers, &messages.GetPeerDiagnostics{})
				st := "no session"
				for _, p := range d.Peers {
					if p.ID == victim.id.ID() {
						st = p.State
					}
				}
				late = append(late, fmt.Sprintf("[victim %s; %+v]", st, *d.Summary.Overlay))
			}
			late = append(late, fmt.Sprintf("%d:%d", i, a))
		}
		if len(late) > 0 {
			time.Sleep(outEvery)
			return fmt.Errorf("frozen node %d still counted by %d nodes (%s)", victim.i, len(late)-1, strings.Join(late[:min(len(late), 8)], " "))
		}
		return nil
	})
	out, left := slices.Max(outAt), 0
	for _, ok := range seen {
		if ok {
			left++
		}
	}
	<-time.After(5 * time.Second) // the flood's tail: a rate, not a condition
	sus := s.meter.snapshot().since(m0).bytes["suspicions"]
	return out, left, float64(sus) / float64(len(s.nodes)-1)
}

// outEvery is the pause between two of freezeOut's looks at the nodes
// that still count the frozen writer (virtual time; Eventually adds its
// own).
const outEvery = 10 * time.Millisecond
