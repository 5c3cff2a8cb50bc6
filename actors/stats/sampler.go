package stats

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/shirou/gopsutil/v3/process"

	"peerdns/actors/plugin"
	"peerdns/internal/procs"
	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/messages"
)

// Counters are the request totals of one HTTP server.
type Counters struct {
	Total, Successful, Failed, TotalMillis int64
}

// ProxyCounters are the edge proxy's totals and its own refusals.
type ProxyCounters struct {
	Counters
	AccessDropped, BodyRefused int64
}

// Snapshot is one published sample: the payload of GET /api/stats.
type Snapshot struct {
	At   time.Time
	JSON []byte
}

// Deps are what the sampler reads; the composition root fills them.
type Deps struct {
	Hub                    *actor.PID // gets messages.StatsUpdate every sample
	Peers, Ledger, Tunnels *actor.PID // asked for their figures (nil: left out)
	Admin                  func() Counters
	Proxy                  func() (ProxyCounters, bool) // false: no edge running
	Plugins                *plugin.Table
	PeerCalls              *plugin.PeerCalls
	DB                     *store.DB // node.db: one sample a minute
	LedgerPath, NodePath   string    // the store files, for their sizes
	DataDir                string    // the data folder, for the drive figures
	Health                 func() map[string]any
	Started                time.Time
	Interval               time.Duration // [1s]
	Published              *view.Publisher[Snapshot]
	Demand                 *Demand       // nil: sample every tick
	FreshFor               time.Duration // [FreshFor] how long a sample is served to readers as it is
}

// FreshFor is how long a sample is served to a reader as it is: two
// ticks. A reader that finds the latest one older asks for SampleNow.
const FreshFor = 2 * time.Second

// SampleNow asks the sampler for a sample at once; it answers with the
// *Snapshot it published (nil if the payload could not be encoded), or
// with the latest one while that is fresh (Deps.FreshFor: readers that
// found it stale together get one sample).
type SampleNow struct{}

// Props is the sampler actor.
func Props(d Deps) *actor.Props {
	if d.Interval <= 0 {
		d.Interval = time.Second
	}
	if d.FreshFor <= 0 {
		d.FreshFor = FreshFor
	}
	return actor.PropsFromProducer(func() actor.Actor { return &sampler{d: d} })
}

type tick struct{ now time.Time }

type sampler struct {
	d          Deps
	proc       *process.Process
	lastCPU    float64 // process CPU seconds at the last sample
	lastAt     time.Time
	lastMinute int64          // unix minute of the last sample kept
	health     string         // last health status seen
	drive      map[string]any // the last driveUsage, kept driveEvery
	driveAt    time.Time
	busy       atomic.Bool
	stop       chan struct{}
}

func (s *sampler) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.proc, _ = process.NewProcess(int32(os.Getpid()))
		s.sample(c, time.Now())
		s.stop = make(chan struct{})
		go s.ticks(c.ActorSystem().Root, c.Self(), s.stop)
	case tick:
		// Every tick while someone reads the samples; otherwise only the
		// minute's sample for the history, and the health check.
		if s.d.Demand == nil || s.d.Demand.Wanted(m.now) || s.minuteDue(m.now) {
			s.sample(c, m.now)
		} else {
			s.checkHealth(c)
		}
		s.busy.Store(false)
	case SampleNow:
		now := time.Now()
		if s.d.Published != nil {
			if cur := s.d.Published.Load(); cur != nil && now.Sub(cur.At) < s.d.FreshFor {
				c.Respond(cur)
				return
			}
		}
		c.Respond(s.sample(c, now))
	case *actor.Stopping, *actor.Restarting:
		// A restart makes a new sampler with its own ticker: this one's
		// ends here.
		if s.stop != nil {
			close(s.stop)
			s.stop = nil
		}
	}
}

// ticks sends a tick every interval unless the last one is still being
// handled.
func (s *sampler) ticks(root *actor.RootContext, self *actor.PID, stop chan struct{}) {
	t := time.NewTicker(s.d.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if s.busy.CompareAndSwap(false, true) {
				root.Send(self, tick{now})
			}
		}
	}
}

// minuteDue reports whether a sample at now would be the first of its
// minute, the one the history keeps.
func (s *sampler) minuteDue(now time.Time) bool {
	return s.d.DB != nil && now.Unix()/60 != s.lastMinute
}

// sample builds one payload, publishes it, sends it to the WebSocket
// subscribers, keeps one a minute and checks health. It returns what it
// published (nil if nothing).
func (s *sampler) sample(c actor.Context, now time.Time) *Snapshot {
	b, err := json.Marshal(s.build(c, now))
	if err != nil {
		return nil
	}
	snap := &Snapshot{At: now, JSON: b}
	if s.d.Published != nil {
		s.d.Published.Store(snap)
	}
	if s.d.Hub != nil {
		msg := append(append([]byte(`{"type":"update-stats","timestamp":`+strconv.FormatInt(now.UnixMilli(), 10)+`,"stats":`), b...), '}')
		c.Send(s.d.Hub, &messages.StatsUpdate{Payload: msg})
	}
	// One sample a minute: the first of each minute (so a node started
	// mid-minute still records that minute).
	if s.minuteDue(now) {
		s.lastMinute = now.Unix() / 60
		keep(s.d.DB, now, b)
	}
	s.checkHealth(c)
	return snap
}

// checkHealth publishes update-health when the health status changed.
func (s *sampler) checkHealth(c actor.Context) {
	if s.d.Health == nil {
		return
	}
	h := s.d.Health()
	st, _ := h["status"].(string)
	if st == s.health {
		return
	}
	s.health = st
	c.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintHealth, Data: h})
}

// ask asks pid with a second's deadline; nil pid or a failure: ok false.
func ask[R any](c actor.Context, pid *actor.PID, req any) (r R, ok bool) {
	if pid == nil {
		return r, false
	}
	res, err := c.RequestFuture(pid, req, time.Second).Result()
	if err != nil {
		return r, false
	}
	r, ok = res.(R)
	return r, ok
}

func (s *sampler) build(c actor.Context, now time.Time) map[string]any {
	st := map[string]any{"timestamp": now.UnixMilli()}
	// Requests: the admin API and the edge proxy.
	var a Counters
	if s.d.Admin != nil {
		a = s.d.Admin()
	}
	total, ok, failed, millis := a.Total, a.Successful, a.Failed, a.TotalMillis
	var proxyReq map[string]int64
	if s.d.Proxy != nil {
		if p, on := s.d.Proxy(); on {
			total, ok, failed, millis = total+p.Total, ok+p.Successful, failed+p.Failed, millis+p.TotalMillis
			proxyReq = map[string]int64{"total": p.Total, "successful": p.Successful, "failed": p.Failed,
				"accessLogDropped": p.AccessDropped, "bodyBudgetRefused": p.BodyRefused}
		}
	}
	rate, avg := 100.0, 0.0
	if total > 0 {
		rate = float64(ok) * 100 / float64(total)
		avg = float64(millis) / float64(total)
	}
	st["requests"] = map[string]any{"total": total, "successful": ok, "failed": failed, "successRate": rate, "avgResponseTime": avg,
		"admin": map[string]int64{"total": a.Total, "successful": a.Successful, "failed": a.Failed}, "proxy": proxyReq}

	// The process (shared by every tunnel child).
	cpu, rss := s.processFigures(now)
	st["process"] = map[string]any{"pid": os.Getpid(), "cpuUsage": map[string]any{"percentage": cpu}, "memoryUsage": map[string]any{"rss": rss},
		"goroutines": runtime.NumGoroutine()}
	st["tunnelChildren"] = s.tunnelChildren(c, cpu, rss)

	if rep, ok := ask[*messages.PeerDiagnosticsReply](c, s.d.Peers, &messages.GetPeerDiagnostics{}); ok {
		st["core"] = rep.Summary
	}
	rpc := []map[string]any{}
	if s.d.Plugins != nil {
		for _, rt := range s.d.Plugins.All() {
			rpc = append(rpc, map[string]any{"domain": rt.Domain, "transport": "stdio-jsonrpc", "calls": rt.Calls.Load(), "failures": rt.Failures.Load()})
		}
	}
	st["pluginRpc"] = rpc
	if s.d.PeerCalls != nil {
		st["peerChannels"] = s.d.PeerCalls.Stats()
	}
	db := map[string]any{"ledgerBytes": fileSize(s.d.LedgerPath), "nodeBytes": fileSize(s.d.NodePath)}
	if rep, ok := ask[*messages.GetSidecarStatusReply](c, s.d.Ledger, &messages.GetSidecarStatus{}); ok {
		db["ledgerOps"] = rep.Status.Length
		db["domains"] = rep.Status.DomainCount
	}
	st["database"] = db
	if s.drive == nil || now.Sub(s.driveAt) >= driveEvery || now.Before(s.driveAt) {
		s.drive, s.driveAt = driveUsage(s.d.DataDir), now
	}
	st["drive"] = s.drive
	return st
}

// processFigures is the process's CPU % since the last sample (a tick
// ago while someone reads the samples, up to a minute when nobody does)
// and RSS.
func (s *sampler) processFigures(now time.Time) (cpu float64, rss uint64) {
	if s.proc == nil {
		return 0, 0
	}
	if used, ok := cpuSeconds(s.proc); ok {
		if !s.lastAt.IsZero() {
			if el := now.Sub(s.lastAt).Seconds(); el > 0 {
				cpu = (used - s.lastCPU) * 100 / el
			}
		}
		s.lastCPU, s.lastAt = used, now
	}
	if m, err := s.proc.MemoryInfo(); err == nil {
		rss = m.RSS
	}
	return cpu, rss
}

func (s *sampler) tunnelChildren(c actor.Context, cpu float64, rss uint64) []map[string]any {
	out := []map[string]any{}
	shared := map[string]any{"pid": os.Getpid(), "cpuUsage": map[string]any{"percentage": cpu, "shared": true},
		"memoryUsage": map[string]any{"rss": rss, "shared": true}}
	add := func(id, typ, state string, tc messages.TunnelCounters) {
		m := map[string]any{"id": id, "type": typ, "status": state, "connections": tc.ConnectionsOpen, "connectionsTotal": tc.ConnectionsTotal,
			"bytesIn": tc.BytesIn, "bytesOut": tc.BytesOut, "uptime": time.Since(s.d.Started).Milliseconds() / 1000}
		for k, v := range shared {
			m[k] = v
		}
		out = append(out, m)
	}
	if rep, ok := ask[*messages.GetTunnelServersReply](c, s.d.Tunnels, &messages.GetTunnelServers{}); ok {
		for _, t := range rep.Servers {
			add(t.ID, "server", t.Info.State, t.Info.TunnelCounters)
		}
	}
	if rep, ok := ask[*messages.GetTunnelClientsReply](c, s.d.Tunnels, &messages.GetTunnelClients{}); ok {
		for _, t := range rep.Clients {
			add(t.ID, "client", t.Info.State, t.Info.TunnelCounters)
		}
	}
	return out
}

func fileSize(p string) int64 {
	if p == "" {
		return 0
	}
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// driveEvery is how long a driveUsage is kept: it walks the whole data
// folder (a stat per file), and the figures it gives move slowly.
const driveEvery = 10 * time.Second

// cpuSeconds is the process's user and system CPU time so far:
// procs.ProcessCPU's one system call where there is getrusage (reading
// /proc took two files and a parse each second), p's times elsewhere.
func cpuSeconds(p *process.Process) (float64, bool) {
	if d, ok := procs.ProcessCPU(); ok {
		return d.Seconds(), true
	}
	t, err := p.Times()
	if err != nil {
		return 0, false
	}
	return t.User + t.System, true
}

// driveUsage is the data folder's size and its file system's space.
func driveUsage(dir string) map[string]any {
	var used int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if i, err := d.Info(); err == nil {
				used += i.Size()
			}
		}
		return nil
	})
	out := map[string]any{"path": dir, "dataBytes": used}
	var fsst syscall.Statfs_t
	if syscall.Statfs(dir, &fsst) == nil {
		out["totalBytes"] = fsst.Blocks * uint64(fsst.Bsize)
		out["freeBytes"] = fsst.Bavail * uint64(fsst.Bsize)
	}
	return out
}
