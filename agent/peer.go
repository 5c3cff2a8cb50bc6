package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"peerdns/agent/logs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/api"
	"peerdns/agent/fleet"
	"peerdns/agent/remotewrite"
	"peerdns/agent/rpc"
	"peerdns/agent/store"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// RetentionFile keeps the retention set over the admin RPC across restarts.
const RetentionFile = "retention.json"

type retentionDoc struct {
	Tier0Seconds int64 `json:"tier0_seconds,omitempty"`
	Tier1Seconds int64 `json:"tier1_seconds,omitempty"`
}

// savedRetention is the retention to open the store with: the Config's
// when set, else what retention.set saved, else the store defaults.
func savedRetention(cfg Config) (t0, t1 time.Duration, err error) {
	t0, t1 = cfg.Tier0Retention, cfg.Tier1Retention
	b, err := os.ReadFile(filepath.Join(cfg.Dir, RetentionFile))
	if errors.Is(err, os.ErrNotExist) {
		return t0, t1, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("agent retention: %w", err)
	}
	var d retentionDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return 0, 0, fmt.Errorf("agent retention %s: %w", RetentionFile, err)
	}
	s0, s1 := store.Seconds(d.Tier0Seconds), store.Seconds(d.Tier1Seconds)
	if err := store.CheckRetention(s0, s1); err != nil {
		return 0, 0, fmt.Errorf("agent retention %s: %w (set it again with retention.set, or remove the file)", filepath.Join(cfg.Dir, RetentionFile), err)
	}
	if t0 == 0 {
		t0 = s0
	}
	if t1 == 0 {
		t1 = s1
	}
	return t0, t1, nil
}

func saveRetention(dir string, db *store.DB) error {
	st := db.Stats()
	b, _ := json.Marshal(retentionDoc{Tier0Seconds: int64(st.Tier0Retention.Seconds()), Tier1Seconds: int64(st.Tier1Retention.Seconds())})
	tmp := filepath.Join(dir, RetentionFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, RetentionFile))
}

// peerRuntime is the agent's part on the peer transport: the admin RPC,
// the parent's children and the child's streamer.
type peerRuntime struct {
	rpc    *rpc.Server
	parent *fleet.Parent
	child  *fleet.Child
	api    atomic.Pointer[api.Server]
	rw     *remotewrite.Writer
	// childAddr is the parent's address when this agent streams to one.
	childAddr string
	wg        sync.WaitGroup
	ctx       context.Context
	cancel    context.CancelFunc
}

// startRemoteWrite sends this agent's points (and a parent's children's)
// to AGENT_REMOTE_WRITE_URL.
func (pr *peerRuntime) startRemoteWrite(_ context.Context, cfg Config, id *identity.Identity, db *store.DB, log *slog.Logger) error {
	if cfg.RemoteWriteURL == "" {
		return nil
	}
	self := api.NodeOf(id).Hostname
	w, err := remotewrite.New(remotewrite.Config{
		URL: cfg.RemoteWriteURL, Log: log,
		Sources: func() []remotewrite.Source {
			out := []remotewrite.Source{{Instance: self, DB: db}}
			if pr.parent != nil {
				for _, n := range pr.parent.Stores() {
					out = append(out, remotewrite.Source{Instance: n.Hostname, Key: n.Key, DB: n.DB})
				}
			}
			return out
		},
	})
	if err != nil {
		return err
	}
	pr.rw = w
	pr.wg.Add(1)
	go func() { defer pr.wg.Done(); w.Run(pr.ctx) }()
	log.Info("agent remote-write to " + cfg.RemoteWriteURL)
	return nil
}

func startPeer(ctx context.Context, cfg Config, id *identity.Identity, db *store.DB, audit *logs.Audit, log *slog.Logger) (_ *peerRuntime, err error) {
	pr := &peerRuntime{}
	pr.ctx, pr.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			pr.cancel()
		}
	}()
	if cfg.Parent {
		pr.parent = fleet.NewParent(fleet.ParentConfig{Log: log})
	}
	off := cfg.PeerAddr == "" || strings.EqualFold(cfg.PeerAddr, "off")
	if off {
		if cfg.Parent || cfg.ParentDest != "" {
			return nil, errors.New("AGENT_PEER_ADDR=off: parent mode and AGENT_PARENT_DEST need the peer transport")
		}
		log.Info("agent peer RPC disabled (AGENT_PEER_ADDR=off)")
		return pr, pr.startRemoteWrite(ctx, cfg, id, db, log)
	}
	rc := rpc.Config{
		Identity: id, ListenAddr: cfg.PeerAddr, Dir: cfg.Dir, DB: db, Audit: audit, Log: log,
		API: func(c *fasthttp.RequestCtx) {
			if s := pr.api.Load(); s != nil {
				s.Handle(c)
				return
			}
			c.Error("agent API starting", fasthttp.StatusServiceUnavailable)
		},
		Retention: func(time.Duration, time.Duration) error { return saveRetention(cfg.Dir, db) },
	}
	if pr.parent != nil {
		rc.Stream = pr.parent
	}
	srv, err := rpc.Listen(rc)
	if err != nil {
		return nil, fmt.Errorf("agent peer RPC: %w", err)
	}
	pr.rpc = srv
	if err := pr.startRemoteWrite(ctx, cfg, id, db, log); err != nil {
		srv.Close()
		return nil, err
	}
	if cfg.ParentDest != "" {
		key, addr, err := rpc.ParseTarget(cfg.ParentDest)
		if err != nil {
			srv.Close()
			return nil, fmt.Errorf("AGENT_PARENT_DEST: %w", err)
		}
		pr.child = fleet.NewChild(fleet.ChildConfig{
			DB: db, Hello: hostHello(id, cfg, db, srv.Addr().String()), ParentKey: key, ParentAddr: addr, Endpoint: srv.Endpoint(), Log: log,
		})
		pr.childAddr = addr
	}
	return pr, nil
}

// serve hands the RPC the REST API, announces the RPC and starts
// streaming to the parent: calls that came before get 503.
func (pr *peerRuntime) serve(srv *api.Server, log *slog.Logger) {
	pr.api.Store(srv)
	if pr.rpc != nil {
		log.Info("agent peer RPC listening on " + pr.rpc.Addr().String() + " key " + pr.rpc.ID())
	}
	if pr.child != nil {
		pr.wg.Add(1)
		go func() { defer pr.wg.Done(); pr.child.Run(pr.ctx) }()
		log.Info("agent streaming to parent " + pr.childAddr)
	}
}

func (pr *peerRuntime) close() {
	pr.cancel()
	pr.wg.Wait()
	if pr.rpc != nil {
		pr.rpc.Close()
	}
	if pr.parent != nil {
		pr.parent.Close()
	}
}

// hostHello is what a child tells its parent about itself: who it is,
// its machine and its agent's options (peerAddr: its admin RPC), so the
// parent answers for it with them.
func hostHello(id *identity.Identity, cfg Config, db *store.DB, peerAddr string) messages.StreamHello {
	n := api.NodeOf(id)
	st := db.Stats()
	return messages.StreamHello{
		Hostname: n.Hostname, GUID: n.GUID, NodeID: n.NodeID, Version: n.Version, OS: n.OS, Arch: n.Arch,
		System: n.System,
		Settings: &messages.StreamSettings{
			Parent: cfg.Parent, Journal: cfg.Journal, AnomalyDetector: true, RemoteWrite: cfg.RemoteWriteURL != "",
			ExportDir: cfg.ExportDir, CORS: cfg.CORS, PeerAddr: peerAddr,
			Tier0Seconds: int64(st.Tier0Retention.Seconds()), Tier1Seconds: int64(st.Tier1Retention.Seconds()),
		},
	}
}
