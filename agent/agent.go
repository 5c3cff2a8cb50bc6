package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"peerdns/agent/api"
	"peerdns/agent/collect"
	"peerdns/agent/health"
	"peerdns/agent/logs"
	"peerdns/agent/ml"
	"peerdns/agent/rpc"
	"peerdns/agent/store"
	"peerdns/transport/identity"
)

// Config is the agent's configuration: the data dir from the command line
// and the AGENT_* environment variables.
type Config struct {
	// Dir is the agent's own data dir, DATA/agent.
	Dir string
	// REST enables the HTTP API (AGENT_REST, "0" disables; default on).
	REST bool
	// Host and Port are the API bind address (AGENT_REST_HOST, default
	// 127.0.0.1; AGENT_REST_PORT, default 18888; 0 picks a free port).
	Host string
	Port int
	// CORS is the Access-Control-Allow-Origin value, sent exactly as set
	// (AGENT_REST_CORS, default "*"); the request's Origin is never echoed.
	CORS string
	// Parent lists connected children in nodes and fleet (AGENT_PARENT=1).
	Parent bool
	// ExportDir receives export?write=1 files (AGENT_EXPORT_DIR, default
	// DATA/agent/exports).
	ExportDir string
	// Journal allows the journal log source (AGENT_JOURNAL, "0" disables).
	// Settings shows it; nothing reads the journal yet.
	Journal bool
	// PeerAddr is the UDP address of the admin RPC on the peer transport
	// (AGENT_PEER_ADDR, default 127.0.0.1:18889; "off" disables it).
	// Remote operators set 0.0.0.0:18889: every call is authenticated by
	// key and role (DATA/agent/peers.json).
	PeerAddr string
	// ParentDest is the parent a child streams to, "<key>@<host:port>"
	// (AGENT_PARENT_DEST; "" streams nowhere).
	ParentDest string
	// RemoteWriteURL is a Prometheus remote-write receiver the agent (and,
	// as a parent, its children) sends new points to
	// (AGENT_REMOTE_WRITE_URL; "" sends nothing).
	RemoteWriteURL string
	// Tier0Retention and Tier1Retention override the store defaults (1h
	// and 14 days) when non-zero.
	Tier0Retention, Tier1Retention time.Duration
	// ReleaseStartupPages gives the executable's start-up pages back to
	// the kernel once the agent runs (AGENT_RELEASE_STARTUP_PAGES, "0"
	// keeps them; default on; Linux only). See pages_linux.go. Turn it off
	// when the binary lives on a slow network filesystem: pages the agent
	// still runs are read from it again once.
	ReleaseStartupPages bool
	// Slabinfo charts the kernel's slab caches (AGENT_SLABINFO, "0"
	// leaves them out; default on): Netdata's slabinfo.plugin, about 700
	// dimensions (see agent/collect/slabinfo.go).
	Slabinfo bool
}

// startupPagesAfter is how long after start the executable's pages are
// released: past the store's load, the collectors' discovery and first
// rounds and the servers' start, which are the start-up work.
const startupPagesAfter = 10 * time.Second

// Addr is the API listen address.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// DefaultPort is the API's default TCP port.
const DefaultPort = 18888

// DefaultPeerAddr is the admin RPC's default UDP address.
const DefaultPeerAddr = "127.0.0.1:18889"

// ConfigFromEnv builds the Config for data dir dataDir (the --data of the
// command, e.g. ./peerdns-data) from the AGENT_* variables. A malformed
// value is an error naming the variable.
func ConfigFromEnv(dataDir string) (Config, error) {
	if dataDir == "" {
		dataDir = "peerdns-data"
	}
	c := Config{
		Dir:     filepath.Join(dataDir, "agent"),
		REST:    true,
		Host:    "127.0.0.1",
		Port:    DefaultPort,
		CORS:    "*",
		Journal: true,

		PeerAddr:            DefaultPeerAddr,
		ReleaseStartupPages: true,
		Slabinfo:            true,
	}
	if v := strings.TrimSpace(os.Getenv("AGENT_PEER_ADDR")); v != "" {
		if _, _, err := net.SplitHostPort(v); err != nil && !strings.EqualFold(v, "off") {
			return c, fmt.Errorf("AGENT_PEER_ADDR: %q is not host:port or off", v)
		}
		c.PeerAddr = v
	}
	if v := strings.TrimSpace(os.Getenv("AGENT_PARENT_DEST")); v != "" {
		if _, _, err := rpc.ParseTarget(v); err != nil {
			return c, fmt.Errorf("AGENT_PARENT_DEST: %w", err)
		}
		c.ParentDest = v
	}
	if v := strings.TrimSpace(os.Getenv("AGENT_REMOTE_WRITE_URL")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("AGENT_REMOTE_WRITE_URL: %q is not an http(s) URL", v)
		}
		c.RemoteWriteURL = v
	}
	c.ExportDir = filepath.Join(c.Dir, "exports")
	if err := boolEnv("AGENT_REST", &c.REST); err != nil {
		return c, err
	}
	if v := strings.TrimSpace(os.Getenv("AGENT_REST_HOST")); v != "" {
		if strings.ContainsAny(v, "/ ") {
			return c, fmt.Errorf("AGENT_REST_HOST: %q is not a host or IP address", v)
		}
		c.Host = strings.Trim(v, "[]")
	}
	if v := strings.TrimSpace(os.Getenv("AGENT_REST_PORT")); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return c, fmt.Errorf("AGENT_REST_PORT: %q is not a port number (0-65535)", v)
		}
		c.Port = p
	}
	if v, ok := os.LookupEnv("AGENT_REST_CORS"); ok && v != "" {
		if strings.ContainsAny(v, "\r\n") {
			return c, errors.New("AGENT_REST_CORS: must be one line")
		}
		c.CORS = v
	}
	if err := boolEnv("AGENT_PARENT", &c.Parent); err != nil {
		return c, err
	}
	if v := strings.TrimSpace(os.Getenv("AGENT_EXPORT_DIR")); v != "" {
		c.ExportDir = v
	}
	if err := boolEnv("AGENT_JOURNAL", &c.Journal); err != nil {
		return c, err
	}
	if err := boolEnv("AGENT_SLABINFO", &c.Slabinfo); err != nil {
		return c, err
	}
	if err := boolEnv("AGENT_RELEASE_STARTUP_PAGES", &c.ReleaseStartupPages); err != nil {
		return c, err
	}
	return c, nil
}

// boolEnv sets *dst from the environment variable name when it is set
// and not blank (1/yes/true/on, 0/no/false/off); otherwise *dst keeps its
// default.
func boolEnv(name string, dst *bool) error {
	v, _ := os.LookupEnv(name)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
	case "1", "yes", "true", "on":
		*dst = true
	case "0", "no", "false", "off":
		*dst = false
	default:
		return fmt.Errorf("%s: %q is not 0 or 1", name, v)
	}
	return nil
}

// Run opens the store, starts the collectors and the alert engine, serves
// the API (unless disabled) and logs "agent listening on <addr>" once it
// accepts connections, or "agent REST API disabled" once everything else
// runs. When ctx is done it stops the server (open connections closed),
// the collectors and the engine, and closes the store (tier 1 flushed);
// every goroutine it started has returned by then. The returned error is
// nil after a clean stop, also when ctx was done before it started.
func Run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("agent data dir: %w", err)
	}
	id, err := identity.LoadOrCreate(filepath.Join(cfg.Dir, "identity.key"))
	if err != nil {
		return fmt.Errorf("agent identity: %w", err)
	}
	t0, t1, err := savedRetention(cfg)
	if err != nil {
		return err
	}
	db, err := store.Open(store.Config{Dir: cfg.Dir, Tier0Retention: t0, Tier1Retention: t1})
	if err != nil {
		return fmt.Errorf("agent store: %w", err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close store: %w", cerr)
		}
	}()
	eng, err := health.New(db, cfg.Dir)
	if err != nil {
		return fmt.Errorf("agent health: %w", err)
	}
	defer func() {
		if cerr := eng.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close health: %w", cerr)
		}
	}()

	// The audit trail lives beside the store; the API adds export writes
	// and prunes to it.
	audit, err := logs.OpenAudit(filepath.Join(cfg.Dir, "audit.log"), 0, log)
	if err != nil {
		return fmt.Errorf("agent audit trail: %w", err)
	}
	defer func() {
		_ = audit.Record(logs.Entry{Priority: logs.PriNotice, Unit: "agent", Message: "agent stopped"})
		if cerr := audit.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close audit trail: %w", cerr)
		}
	}()
	_ = audit.Record(logs.Entry{Priority: logs.PriNotice, Unit: "agent", Message: "agent started", Fields: map[string]string{
		"version": api.Version, "addr": cfg.Addr(), "journal": strconv.FormatBool(cfg.Journal), "parent": strconv.FormatBool(cfg.Parent),
		"export_dir": cfg.ExportDir, "cors": cfg.CORS,
	}})

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	// The anomaly detector runs in the collection goroutine, right after
	// each second's points are stored: it sees every point while its
	// tier-1 minute is still open, and never races the next collection.
	det := ml.New(db, ml.Config{GUID: api.MachineGUID(id), Hostname: api.Hostname(), Log: log})
	coll := collect.New(db, log, collect.Options{NoSlabinfo: !cfg.Slabinfo})
	coll.AfterCollect = det.Tick
	go func() { defer wg.Done(); coll.Run(runCtx) }()
	go func() { defer wg.Done(); eng.Run(runCtx) }()
	if cfg.ReleaseStartupPages {
		wg.Add(1)
		go func() { defer wg.Done(); releaseStartupPages(runCtx, log) }()
	}
	// Stop the workers before the deferred closes run (LIFO: this runs first).
	defer wg.Wait()
	defer stop()

	pr, err := startPeer(runCtx, cfg, id, db, audit, log)
	if err != nil {
		return err
	}
	defer pr.close()
	opts := api.Options{
		DB: db, Health: eng, Collected: coll, Audit: audit, Anomaly: det.LogSource(), ML: det, Identity: id, CORS: cfg.CORS, Parent: cfg.Parent,
		ExportDir: cfg.ExportDir, Journal: cfg.Journal, DataDir: cfg.Dir, Log: log,
	}
	if pr.rpc != nil {
		opts.Peer = pr.rpc
	}
	if pr.parent != nil {
		opts.Fleet = pr.parent
	}
	if pr.rw != nil {
		opts.RemoteWrite = pr.rw
	}
	srv, err := api.New(opts)
	if err != nil {
		return err
	}
	coll.SetServerStats(srv.Stats)
	pr.serve(srv, log)

	if !cfg.REST {
		log.Info("agent REST API disabled (AGENT_REST=0)")
		<-ctx.Done()
		return nil
	}
	// No TCP keepalive on accepted connections: idle ones are closed by
	// the server's idle timeout anyway, and setting keepalive costs four
	// setsockopt calls per connection (8% of the CPU of a
	// connection-per-request load in a profile).
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while resolving the host: a clean stop
		}
		return fmt.Errorf("agent listen: %w", err)
	}
	if h := cfg.Host; h != "127.0.0.1" && h != "localhost" && h != "::1" && !strings.HasPrefix(h, "127.") {
		log.Warn("agent API bound beyond loopback: put it behind a firewall, reverse proxy or tunnel", "addr", ln.Addr().String())
	}
	log.Info("agent listening on " + ln.Addr().String())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		if err := srv.Shutdown(); err != nil {
			log.Warn("agent API shutdown", "err", err)
		}
		<-serveErr
		return nil
	case err := <-serveErr:
		return fmt.Errorf("agent API: %w", err)
	}
}

// releaseStartupPages waits startupPagesAfter (or ctx), then releases the
// executable's pages once and logs what it did.
func releaseStartupPages(ctx context.Context, log *slog.Logger) {
	t := time.NewTimer(startupPagesAfter)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	before, after, err := releaseExecutablePages()
	if err != nil {
		log.Info("start-up pages of the executable kept", "err", err)
		return
	}
	log.Info("start-up pages of the executable released", "rssFileBeforeKiB", before>>10, "rssFileAfterKiB", after>>10)
}
