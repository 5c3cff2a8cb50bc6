package node

import (
	"encoding/json"
	"time"

	"github.com/fasthttp/router"

	"peerdns/actors/stats"
	"peerdns/http/admin"
	"peerdns/internal/ask"
	"peerdns/internal/view"
)

// Stats: the sampler is the stats actor (actors/stats); the routes and
// the WebSocket's snapshot are http/admin's. This file hands them to
// each other.

// newStats makes the published snapshot the routes read (before the
// admin routes exist).
func (n *Node) newStats() {
	n.stats = &view.Publisher[stats.Snapshot]{}
	n.started = time.Now()
}

// startStats spawns the sampler once the admin API and the edge run; it
// stops first, before the parts it reads.
func (n *Node) startStats() error {
	pid, err := n.root.Spawn("stats", stats.Props(stats.Deps{
		Hub: n.hub, Peers: n.peers, Ledger: n.ledger, Tunnels: n.tunnels,
		Admin: func() stats.Counters {
			a := n.admin.Requests()
			return stats.Counters{Total: a.Total, Successful: a.Successful, Failed: a.Failed, TotalMillis: a.TotalMillis}
		},
		Proxy: func() (stats.ProxyCounters, bool) {
			p := n.edge.Load()
			if p == nil {
				return stats.ProxyCounters{}, false
			}
			c := p.Counters()
			return stats.ProxyCounters{Counters: stats.Counters{Total: c.Total, Successful: c.Successful, Failed: c.Failed, TotalMillis: c.TotalMillis},
				AccessDropped: c.AccessDropped, BodyRefused: c.BodyRefused}, true
		},
		Plugins: n.pluginTable, PeerCalls: n.peerCalls,
		DB: n.nodeDB, LedgerPath: n.ledgerDB.Path(), NodePath: n.nodeDB.Path(), DataDir: n.orig.Data,
		Health: func() map[string]any {
			_, h := n.admin.Health("liveness")
			return h
		},
		Started: n.started, Published: n.stats, Demand: n.statsWant,
	}))
	if err != nil {
		return err
	}
	n.statsPID.Store(pid)
	n.closers = append(n.closers, func() { _ = n.root.System.Root.StopFuture(pid).Wait() })
	return nil
}

// statsSource is the published snapshot and the kept history as the
// admin routes read them.
type statsSource struct{ n *Node }

// Latest is the latest sample, taken anew when it is no longer fresh
// (stats.FreshFor: nobody has read the samples for a while, so the
// sampler has been sampling once a minute); the read keeps the sampler
// sampling every tick for stats.Warm.
func (s statsSource) Latest() ([]byte, bool) {
	now := time.Now()
	s.n.statsWant.Asked(now)
	cur := s.n.stats.Load()
	if pid := s.n.statsPID.Load(); pid != nil && (cur == nil || now.Sub(cur.At) >= stats.FreshFor) {
		// A sample asks three actors with a second's deadline each.
		if fresh, err := ask.Reply[*stats.Snapshot](s.n.root.System.Root, pid, stats.SampleNow{}, 4*time.Second); err == nil && fresh != nil {
			cur = fresh
		}
	}
	if cur == nil {
		return nil, false
	}
	return cur.JSON, true
}

func (s statsSource) History(minutes int) []json.RawMessage {
	return stats.History(s.n.nodeDB, time.Now(), minutes)
}

func (n *Node) statsRoutes(r *router.Router) { admin.RegisterStats(r, n.logs["core"], statsSource{n}) }

// statsSnapshot is the stats-snapshot WebSocket message.
func (n *Node) statsSnapshot(minutes int) ([]byte, error) {
	return n.admin.StatsSnapshot(statsSource{n}, minutes)
}
