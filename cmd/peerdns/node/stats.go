package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fasthttp/router"
	"github.com/shirou/gopsutil/v3/process"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/http/ws"
	"peerdns/messages"
)

// Stats.
//
// A sampler goroutine builds the stats payload once a second (GET
// /api/stats reads the latest; WebSocket subscribers get it as one
// update-stats message, the same bytes for all), checks health and
// publishes update-health when its status changes, and once a minute
// keeps a sample in node.db ("stats:h:<unix minute>", 24 h kept, across
// restarts) for GET /api/stats/historical.
//
// CPU and memory: every tunnel server and client runs inside this one
// process, so there is no per-tunnel CPU or memory to measure. Each
// tunnel child reports the node process's own figures (pid, CPU % over
// the last second, RSS) marked "shared": true, next to its own
// connections and bytes, which are per tunnel.

const (
	histPrefix = "stats:h:"
	histKeep   = 24 * time.Hour
	// MaxHistoryMinutes bounds ?minutes= (1..1440; outside is a 400).
	MaxHistoryMinutes = 1440
)

type sampler struct {
	n       *Node
	latest  atomic.Pointer[[]byte] // the last payload (JSON)
	health  string                 // last health status seen
	proc    *process.Process
	lastCPU float64 // process CPU seconds at the last sample
	lastAt  time.Time
	// lastMinute is the unix minute of the last sample kept.
	lastMinute int64
}

// newStats makes the sampler (before the admin routes that read it).
func (n *Node) newStats() {
	s := &sampler{n: n}
	s.proc, _ = process.NewProcess(int32(os.Getpid()))
	n.stats = s
	n.started = time.Now()
}

// startStats takes the first sample and ticks every second; it stops
// with the node's parts.
func (n *Node) startStats() {
	s := n.stats
	s.sample(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				s.sample(now)
			}
		}
	}()
	n.closers = append(n.closers, func() { cancel(); <-done })
}

// sample builds one second's payload, sends it to the WebSocket
// subscribers, and keeps one a minute.
func (s *sampler) sample(now time.Time) {
	st := s.build(now)
	b, err := json.Marshal(st)
	if err != nil {
		return
	}
	s.latest.Store(&b)
	msg := append(append([]byte(`{"type":"update-stats","timestamp":`+strconv.FormatInt(now.UnixMilli(), 10)+`,"stats":`), b...), '}')
	s.n.root.System.Root.Send(s.n.hub, &ws.StatsUpdate{Payload: msg})
	// One sample a minute: the first of each minute (so a node started
	// mid-minute still records that minute).
	if m := now.Unix() / 60; m != s.lastMinute {
		s.lastMinute = m
		s.keep(now, b)
	}
	s.checkHealth()
}

func (s *sampler) keep(now time.Time, b []byte) {
	db := s.n.nodeDB
	minute := now.Unix() / 60
	rec, _ := json.Marshal(map[string]any{"timestamp": now.UnixMilli(), "data": json.RawMessage(b)})
	_ = db.Set(histPrefix+strconv.FormatInt(minute, 10), string(rec))
	old, _ := db.List(histPrefix)
	for _, kv := range old {
		m, err := strconv.ParseInt(kv.Key[len(histPrefix):], 10, 64)
		if err == nil && now.Sub(time.Unix(m*60, 0)) > histKeep {
			_ = db.Delete(kv.Key)
		}
	}
}

// history is the samples of the last minutes, oldest first.
func (s *sampler) history(minutes int) []json.RawMessage {
	out := []json.RawMessage{}
	kvs, _ := s.n.nodeDB.List(histPrefix)
	from := time.Now().Add(-time.Duration(minutes)*time.Minute).Unix() / 60
	for _, kv := range kvs {
		m, err := strconv.ParseInt(kv.Key[len(histPrefix):], 10, 64)
		if err == nil && m >= from {
			out = append(out, json.RawMessage(kv.Value))
		}
	}
	return out
}

func (s *sampler) build(now time.Time) map[string]any {
	n := s.n
	st := map[string]any{"timestamp": now.UnixMilli()}
	// Requests: the admin API and the edge proxy.
	a := n.admin.Requests()
	total, ok, failed, millis := a.Total, a.Successful, a.Failed, a.TotalMillis
	var proxyReq map[string]int64
	if p := n.edge.Load(); p != nil {
		c := p.Counters()
		total, ok, failed, millis = total+c.Total, ok+c.Successful, failed+c.Failed, millis+c.TotalMillis
		proxyReq = map[string]int64{"total": c.Total, "successful": c.Successful, "failed": c.Failed, "accessLogDropped": c.AccessDropped, "bodyBudgetRefused": c.BodyRefused}
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
	procInfo := map[string]any{"pid": os.Getpid(), "cpuUsage": map[string]any{"percentage": cpu}, "memoryUsage": map[string]any{"rss": rss},
		"goroutines": runtime.NumGoroutine()}
	st["process"] = procInfo
	st["tunnelChildren"] = s.tunnelChildren(cpu, rss)

	root := n.root.System.Root
	if rep, err := httpx.Ask[*messages.PeerDiagnosticsReply](root, n.peers, &messages.GetPeerDiagnostics{}, time.Second); err == nil {
		st["core"] = rep.Summary
	}
	var rpc []map[string]any
	for _, rt := range n.pluginTable.All() {
		rpc = append(rpc, map[string]any{"domain": rt.Domain, "transport": "stdio-jsonrpc", "calls": rt.Calls.Load(), "failures": rt.Failures.Load()})
	}
	if rpc == nil {
		rpc = []map[string]any{}
	}
	st["pluginRpc"] = rpc
	st["peerChannels"] = n.peerCalls.Stats()
	db := map[string]any{"ledgerBytes": fileSize(n.ledgerDB.Path()), "nodeBytes": fileSize(n.nodeDB.Path())}
	if rep, err := httpx.Ask[*messages.GetSidecarStatusReply](root, n.ledger, &messages.GetSidecarStatus{}, time.Second); err == nil {
		db["ledgerOps"] = rep.Status.Length
		db["domains"] = rep.Status.DomainCount
	}
	st["database"] = db
	st["drive"] = driveUsage(n.orig.Data)
	return st
}

// processFigures is the process's CPU % since the last sample and RSS.
func (s *sampler) processFigures(now time.Time) (cpu float64, rss uint64) {
	if s.proc == nil {
		return 0, 0
	}
	if t, err := s.proc.Times(); err == nil {
		used := t.User + t.System
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

func (s *sampler) tunnelChildren(cpu float64, rss uint64) []map[string]any {
	out := []map[string]any{}
	root := s.n.root.System.Root
	shared := map[string]any{"pid": os.Getpid(), "cpuUsage": map[string]any{"percentage": cpu, "shared": true},
		"memoryUsage": map[string]any{"rss": rss, "shared": true}}
	add := func(id, typ, state string, c messages.TunnelCounters) {
		m := map[string]any{"id": id, "type": typ, "status": state, "connections": c.ConnectionsOpen, "connectionsTotal": c.ConnectionsTotal,
			"bytesIn": c.BytesIn, "bytesOut": c.BytesOut, "uptime": time.Since(s.n.started).Milliseconds() / 1000}
		for k, v := range shared {
			m[k] = v
		}
		out = append(out, m)
	}
	if rep, err := httpx.Ask[*messages.GetTunnelServersReply](root, s.n.tunnels, &messages.GetTunnelServers{}, time.Second); err == nil {
		for _, t := range rep.Servers {
			add(t.ID, "server", t.Info.State, t.Info.TunnelCounters)
		}
	}
	if rep, err := httpx.Ask[*messages.GetTunnelClientsReply](root, s.n.tunnels, &messages.GetTunnelClients{}, time.Second); err == nil {
		for _, t := range rep.Clients {
			add(t.ID, "client", t.Info.State, t.Info.TunnelCounters)
		}
	}
	return out
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
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

// checkHealth publishes update-health when the health status changed.
func (s *sampler) checkHealth() {
	_, h := s.n.admin.Health("liveness")
	st, _ := h["status"].(string)
	if st == s.health {
		return
	}
	s.health = st
	s.n.root.System.EventStream.Publish(&messages.Hint{Type: "update-health", Data: h})
}

// statsSnapshot is the stats-snapshot WebSocket message.
func (n *Node) statsSnapshot(minutes int) ([]byte, error) {
	if minutes <= 0 {
		minutes = 60
	}
	if minutes > MaxHistoryMinutes {
		return nil, fmt.Errorf("minutes must be 1..%d", MaxHistoryMinutes)
	}
	s := n.stats
	cur := s.latest.Load()
	if cur == nil {
		return nil, fmt.Errorf("no sample yet")
	}
	_, health := n.admin.Health("liveness")
	status, err := n.admin.Status()
	if err != nil {
		status = map[string]any{"error": err.Error()}
	}
	return json.Marshal(map[string]any{"type": "stats-snapshot", "stats": json.RawMessage(*cur), "historical": s.history(minutes),
		"health": health, "status": status, "minutes": minutes})
}

// statsRoutes registers GET /api/stats and /api/stats/historical.
func (n *Node) statsRoutes(r *router.Router) {
	log := n.logs["core"]
	r.GET("/api/stats", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		cur := n.stats.latest.Load()
		if cur == nil {
			return httpx.Internal("no sample yet")
		}
		return httpx.JSONBytes(ctx, *cur)
	}))
	r.GET("/api/stats/historical", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		minutes := 60
		if v := ctx.QueryArgs().Peek("minutes"); len(v) > 0 {
			m, err := strconv.Atoi(string(v))
			if err != nil || m < 1 || m > MaxHistoryMinutes {
				return httpx.BadRequest("minutes must be a whole number 1..%d", MaxHistoryMinutes)
			}
			minutes = m
		}
		return httpx.JSON(ctx, 200, n.stats.history(minutes))
	}))
}
