package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"peerdns/agent/logs"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/store"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// StreamHandler takes over a child's stream once the call is authorised:
// it writes the AgentReply (with Resume) itself and then reads batches
// until the stream ends. The parent (agent/fleet) implements it.
type StreamHandler interface {
	ServeStream(ctx context.Context, peer string, hello *messages.StreamHello, st transport.Stream)
}

// Config configures the RPC server.
type Config struct {
	Identity   *identity.Identity
	ListenAddr string // UDP, e.g. "127.0.0.1:18889"; port 0 picks one
	Dir        string // the agent's data dir: peers.json and audit.log
	// API answers api.get in-process (the REST API's fasthttp handler).
	API fasthttp.RequestHandler
	DB  *store.DB
	// Audit is the agent's audit trail (agent/logs), shared with the REST
	// API's logs?source=audit; nil keeps one in memory.
	Audit *logs.Audit
	// Stream serves children in parent mode; nil refuses "stream" (404).
	Stream StreamHandler
	// Retention is called after retention.set succeeded, to persist it.
	Retention func(tier0, tier1 time.Duration) error
	Log       *slog.Logger
	Now       func() time.Time
	// CallTimeout bounds one call from its first byte to the reply (30s).
	CallTimeout time.Duration
}

// Counters of refused and served calls, shown by /api/v3/tunnel.
type Counters struct {
	Calls        atomic.Int64 // answered with 2xx
	Failed       atomic.Int64 // allowed but failed (4xx/5xx from the method)
	UnknownKey   atomic.Int64 // key not in the allowlist
	Forbidden    atomic.Int64 // role does not allow the method
	Malformed    atomic.Int64 // frame too large, not CBOR, or invalid
	Replayed     atomic.Int64 // nonce seen, or time outside the window
	StreamsOpen  atomic.Int64
	ConnsRefused atomic.Int64
}

// Server is the agent's admin RPC endpoint on the peer transport.
type Server struct {
	cfg    Config
	ep     *transport.QUICEndpoint
	allow  *Allowlist
	audit  *logs.Audit
	replay *replayGuard
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// C counts calls by outcome.
	C Counters
}

// Listen opens the QUIC endpoint and starts serving.
func Listen(cfg Config) (*Server, error) {
	if cfg.Identity == nil || cfg.Dir == "" || cfg.API == nil || cfg.DB == nil {
		return nil, errors.New("rpc: Identity, Dir, API and DB are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	audit := cfg.Audit
	if audit == nil {
		a, err := logs.OpenAudit("", 0, cfg.Log)
		if err != nil {
			return nil, fmt.Errorf("audit trail: %w", err)
		}
		audit = a
	}
	ep, err := transport.Listen(transport.Config{Identity: cfg.Identity, ListenAddr: cfg.ListenAddr, Logger: cfg.Log})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, ep: ep, allow: OpenAllowlist(cfg.Dir), audit: audit, replay: newReplayGuard(ReplayWindow),
		log: cfg.Log, ctx: ctx, cancel: cancel,
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the UDP address the server listens on.
func (s *Server) Addr() net.Addr { return s.ep.Addr() }

// Endpoint is the server's QUIC endpoint; a child dials its parent with
// it, so one UDP socket carries both.
func (s *Server) Endpoint() *transport.QUICEndpoint { return s.ep }

// ID is the agent's peer key.
func (s *Server) ID() string { return s.ep.ID() }

// Audit is the call trail.
func (s *Server) Audit() *logs.Audit { return s.audit }

// Close stops serving: every connection closes and every goroutine the
// server started has returned.
func (s *Server) Close() error {
	s.cancel()
	err := s.ep.Close()
	s.wg.Wait()
	return err
}

// Functions maps the job names functions.run runs to their help.
func (s *Server) Functions() map[string]string {
	fs := map[string]string{}
	for _, n := range FunctionNames() {
		fs[n] = FunctionHelp(n)
	}
	return fs
}

// Listening is the RPC's listening state and address, without the
// allowlist read Status makes (/, info and db show it on every request).
func (s *Server) Listening() (bool, string) { return s.ctx.Err() == nil, s.ep.Addr().String() }

// Status is what /api/v3/tunnel shows of the RPC endpoint.
func (s *Server) Status() map[string]any {
	st := map[string]any{
		"listening": s.ctx.Err() == nil,
		"address":   s.ep.Addr().String(),
		"protocol":  "quic " + transport.ALPN,
		"peers":     s.allow.Count(),
		"calls": map[string]int64{
			"ok": s.C.Calls.Load(), "failed": s.C.Failed.Load(),
			"refused_unknown_key": s.C.UnknownKey.Load(), "refused_role": s.C.Forbidden.Load(),
			"refused_malformed": s.C.Malformed.Load(), "refused_replayed": s.C.Replayed.Load(),
		},
		"streams_open":            s.C.StreamsOpen.Load(),
		"refused_pending_inbound": s.ep.RefusedInbound(),
	}
	if err := s.allow.Err(); err != nil {
		st["allowlist_error"] = err.Error()
	}
	return st
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ep.Accept(s.ctx)
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serveConn(c) }()
	}
}

// unknownKeyGrace bounds what a key that is not in the allowlist gets of
// the agent: its first call must have arrived whole within it. Until it
// is closed, its connection holds one of the endpoint's places for
// connections not admitted yet (transport.Config.MaxPendingInbound).
const unknownKeyGrace = 5 * time.Second

// serveConn serves one peer. A key that is not in the allowlist is not
// admitted: its first call (opened and read within unknownKeyGrace) is
// answered 403 so the operator sees why, recorded, and the connection is
// closed. An allowed
// key may open calls until it disconnects; its role is looked up again at
// every call, so a deny takes effect at the next one.
func (s *Server) serveConn(c transport.Conn) {
	defer c.Close("bye")
	if s.allow.Role(c.PeerID()) == "" {
		s.C.ConnsRefused.Add(1)
		readBy := time.Now().Add(unknownKeyGrace)
		ctx, cancel := context.WithDeadline(s.ctx, readBy)
		st, err := c.AcceptStream(ctx)
		cancel()
		if err == nil {
			s.serveCall(c, st, readBy)
			// Let the peer read the refusal before the connection closes
			// (a close would discard the reply in flight).
			select {
			case <-c.Done():
			case <-time.After(2 * time.Second):
			case <-s.ctx.Done():
			}
		} else {
			s.C.UnknownKey.Add(1)
			s.record(c, "", "", "", 403, "unknown key", 0)
		}
		return
	}
	c.Admit()
	go func() {
		// Nothing is sent on the control stream by either side; reading
		// it notices a peer that closes it and frees its buffer.
		for {
			if _, err := c.Recv(); err != nil {
				return
			}
		}
	}()
	for {
		st, err := c.AcceptStream(s.ctx)
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serveCall(c, st, time.Time{}) }()
	}
}

func (s *Server) record(c transport.Conn, role, method, target string, status int, msg string, d time.Duration) {
	pri, what := logs.PriInfo, "allowed"
	if status >= 400 {
		pri, what = logs.PriWarning, "refused or failed"
	}
	fields := map[string]string{
		"peer": c.PeerID(), "remote": c.RemoteAddr().String(), "role": role, "method": method,
		"target": target, "status": strconv.Itoa(status), "duration_ms": strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64),
	}
	if msg != "" {
		fields["error"] = msg
	}
	e := logs.Entry{
		Time: s.cfg.Now().UTC(), Priority: pri, Unit: "rpc",
		Message: "rpc " + method + " " + target + " by " + shortKey(c.PeerID()) + " (" + roleName(role) + "): " + what + ", " + strconv.Itoa(status),
		Fields:  fields,
	}
	if err := s.audit.Record(e); err != nil {
		s.log.Warn("agent rpc: audit write failed", "err", err)
	}
	if status >= 400 {
		s.log.Warn("agent rpc: call refused or failed", "peer", c.PeerID(), "role", role, "method", method, "target", target, "status", status, "err", msg)
	} else {
		s.log.Info("agent rpc call", "peer", c.PeerID(), "role", role, "method", method, "target", target, "status", status)
	}
}

// allowed says whether role may call method (for logs, source matters).
func allowed(role string, r *messages.AgentRequest) bool {
	switch role {
	case messages.RoleAdmin:
		return true
	case messages.RoleChild:
		return r.Method == messages.AgentStream
	case messages.RoleViewer:
		switch r.Method {
		case messages.AgentInfo, messages.AgentFunctionsList:
			return true
		case messages.AgentGet:
			return !writes(r.Path) && !adminOnly(r.Path)
		case messages.AgentLogs:
			return r.Logs.Source == "anomaly"
		}
	}
	return false
}

// apiTarget parses an api.get path the way the REST handler will see it
// (s.get: fasthttp's SetRequestURI, which decodes %XX, removes dot
// segments and collapses slashes, then the handler's /host/<name>/
// switch, which runs the rest of the path): the role checks must judge
// the command the handler runs, not the raw text, or /api/v3/%6cogs,
// /api/v3/logs/./ and /api/../host/<this host>/api/v3/logs would read
// the journal as /api/v3/logs does.
func apiTarget(path string) (cmd string, args *fasthttp.Args) {
	var u fasthttp.URI
	u.Update(path)
	p := string(u.Path())
	for {
		rest, ok := strings.CutPrefix(p, "/host/")
		if !ok {
			break
		}
		_, sub, _ := strings.Cut(rest, "/")
		p = "/" + sub
	}
	p = strings.TrimSuffix(p, "/")
	args = &fasthttp.Args{}
	u.QueryArgs().CopyTo(args)
	return p, args
}

// adminLogs reports whether an api.get path reads an admin-only log
// (the journal, the default source, or the audit trail): a viewer reads
// only the anomaly source, through either door.
func adminLogs(path string) bool {
	p, args := apiTarget(path)
	if !strings.HasPrefix(p, "/api/v") || !strings.HasSuffix(p, "/logs") {
		return false
	}
	if _, err := url.ParseQuery(strings.SplitN(path+"?", "?", 2)[1]); err != nil {
		return true
	}
	srcs := args.PeekMulti("source")
	if len(srcs) == 0 {
		return true // journal, the default
	}
	for _, v := range srcs {
		if string(v) != "anomaly" {
			return true
		}
	}
	return false
}

// adminOnly reports whether an api.get path reads what only an admin
// may: the process table (the command lines functions.run keeps from
// viewers) or an admin-only log.
func adminOnly(path string) bool {
	if adminLogs(path) {
		return true
	}
	p, _ := apiTarget(path)
	return strings.HasPrefix(p, "/api/v") && strings.HasSuffix(p, "/processes")
}

// writes reports whether an api.get path asks the API to write
// (export?write=1, the one GET that does): that is an admin's call.
func writes(path string) bool {
	_, q, _ := strings.Cut(path, "?")
	vals, err := url.ParseQuery(q)
	if err != nil {
		return true // the API would read it some way; do not guess
	}
	falsy := func(v string) bool {
		switch strings.ToLower(v) {
		case "", "0", "no", "false", "off":
			return true
		}
		return false
	}
	for _, v := range vals["write"] {
		if !falsy(v) {
			return true
		}
	}
	// And as the handler parses it.
	_, args := apiTarget(path)
	for _, v := range args.PeekMulti("write") {
		if !falsy(string(v)) {
			return true
		}
	}
	return false
}

func target(r *messages.AgentRequest) string {
	switch {
	case r.Path != "":
		return r.Path
	case r.Prune != nil:
		c := r.Prune.Chart
		if c == "" {
			c = "*"
		}
		return c + " before " + strconv.FormatInt(r.Prune.BeforeUnix, 10)
	case r.Retention != nil:
		return fmt.Sprintf("tier0=%ds tier1=%ds", r.Retention.Tier0Seconds, r.Retention.Tier1Seconds)
	case r.Function != nil:
		return r.Function.Name
	case r.Logs != nil:
		return r.Logs.Source
	case r.Stream != nil:
		return r.Stream.Hostname
	}
	return ""
}

// serveCall serves one call; readBy, when set, is the earlier time by
// which the request must have been read (an unknown key's grace).
func (s *Server) serveCall(c transport.Conn, st transport.Stream, readBy time.Time) {
	start := time.Now()
	_ = st.SetDeadline(start.Add(s.cfg.CallTimeout))
	if !readBy.IsZero() && readBy.Before(start.Add(s.cfg.CallTimeout)) {
		// The answer still has the call's time to be written.
		_ = st.SetReadDeadline(readBy)
	}
	var req messages.AgentRequest
	role := s.allow.Role(c.PeerID())
	// Every call is in the audit trail before its caller has the answer.
	reply := func(rep *messages.AgentReply, method, tgt string) {
		b, err := messages.Marshal(rep)
		if err != nil || len(b) > messages.AgentMaxFrame {
			// The reply itself cannot be sent: say so instead.
			rep = &messages.AgentReply{Status: 413, Error: fmt.Sprintf("%v: reply of %d bytes (limit %d)", messages.ErrFrameTooLarge, len(b), messages.AgentMaxFrame)}
			if err != nil {
				rep = &messages.AgentReply{Status: 500, Error: "encode reply: " + err.Error()}
			}
			b, _ = messages.Marshal(rep)
		}
		s.record(c, role, method, tgt, rep.Status, rep.Error, time.Since(start))
		_ = messages.WriteFrameBytes(st, b, messages.AgentMaxFrame)
		_ = st.Close()
	}
	if err := messages.ReadFrame(st, &req, messages.AgentMaxFrame); err != nil {
		if role == "" {
			s.C.UnknownKey.Add(1)
			reply(&messages.AgentReply{Status: 403, Error: "unknown key: this agent's allowlist does not have " + c.PeerID()}, "", "")
			return
		}
		s.C.Malformed.Add(1)
		reply(&messages.AgentReply{Status: 400, Error: "malformed request: " + err.Error()}, "", "")
		return
	}
	if role == "" {
		s.C.UnknownKey.Add(1)
		reply(&messages.AgentReply{Status: 403, Error: "unknown key: this agent's allowlist does not have " + c.PeerID()}, req.Method, "")
		return
	}
	if err := req.Validate(); err != nil {
		s.C.Malformed.Add(1)
		reply(&messages.AgentReply{Status: 400, Error: err.Error()}, req.Method, "")
		return
	}
	tgt := target(&req)
	switch s.replay.check(c.PeerID(), req.Nonce, time.Unix(0, req.TimeUnixNano), s.cfg.Now()) {
	case replayStale:
		s.C.Replayed.Add(1)
		reply(&messages.AgentReply{Status: 409, Error: fmt.Sprintf("request time is more than %v away from the agent's clock (replayed, or a clock to fix)", ReplayWindow)}, req.Method, tgt)
		return
	case replaySeen:
		s.C.Replayed.Add(1)
		reply(&messages.AgentReply{Status: 409, Error: "replayed request: nonce already used"}, req.Method, tgt)
		return
	case replayFull:
		reply(&messages.AgentReply{Status: 503, Error: "too many requests in the replay window; retry later"}, req.Method, tgt)
		return
	}
	if !allowed(role, &req) {
		s.C.Forbidden.Add(1)
		reply(&messages.AgentReply{Status: 403, Error: fmt.Sprintf("role %s may not call %s %s", role, req.Method, tgt)}, req.Method, tgt)
		return
	}
	if req.Method == messages.AgentStream {
		if s.cfg.Stream == nil {
			reply(&messages.AgentReply{Status: 404, Error: "this agent is not a parent (AGENT_PARENT=1 enables it)"}, req.Method, tgt)
			return
		}
		s.record(c, role, req.Method, tgt, 200, "", time.Since(start))
		s.C.Calls.Add(1)
		s.C.StreamsOpen.Add(1)
		defer s.C.StreamsOpen.Add(-1)
		_ = st.SetDeadline(time.Time{})
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.watchRole(ctx, cancel, c) }()
		s.cfg.Stream.ServeStream(ctx, c.PeerID(), req.Stream, st)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CallTimeout)
	defer cancel()
	rep := s.dispatch(ctx, role, &req)
	if rep.Status >= 200 && rep.Status < 300 {
		s.C.Calls.Add(1)
	} else {
		s.C.Failed.Add(1)
	}
	reply(rep, req.Method, tgt)
}

// roleRecheck is how often a child's stream, a call that lasts as long
// as the child is up, looks its role up again.
const roleRecheck = 5 * time.Second

// watchRole ends a child's stream (cancel) once its key is no longer a
// child's in the allowlist: a deny takes effect on the stream too, not
// only at its next call, which a streaming child never makes.
func (s *Server) watchRole(ctx context.Context, cancel context.CancelFunc, c transport.Conn) {
	t := time.NewTicker(roleRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if role := s.allow.Role(c.PeerID()); role != messages.RoleChild {
			s.record(c, role, messages.AgentStream, "", 403, "stream ended: the key is no longer a child's", 0)
			cancel()
			return
		}
	}
}

func jsonReply(v any) *messages.AgentReply {
	b, err := json.Marshal(v)
	if err != nil {
		return &messages.AgentReply{Status: 500, Error: "encode reply: " + err.Error()}
	}
	return &messages.AgentReply{Status: 200, ContentType: "application/json", Body: b}
}

func errReply(status int, format string, a ...any) *messages.AgentReply {
	return &messages.AgentReply{Status: status, Error: fmt.Sprintf(format, a...)}
}

func (s *Server) dispatch(ctx context.Context, role string, r *messages.AgentRequest) *messages.AgentReply {
	switch r.Method {
	case messages.AgentInfo:
		st := s.cfg.DB.Stats()
		return jsonReply(map[string]any{
			"peer_public_key": s.ID(), "role": role, "rpc": s.Status(),
			"functions": FunctionNames(), "parent": s.cfg.Stream != nil,
			"retention": map[string]int64{"tier0_seconds": int64(st.Tier0Retention.Seconds()), "tier1_seconds": int64(st.Tier1Retention.Seconds())},
			"charts":    st.Charts, "dimensions": st.Dimensions, "first_entry": st.FirstTime, "last_entry": st.LastTime,
		})
	case messages.AgentGet:
		return s.get(r.Path)
	case messages.AgentRetentionSet:
		t0, t1 := store.Seconds(r.Retention.Tier0Seconds), store.Seconds(r.Retention.Tier1Seconds)
		if err := s.cfg.DB.SetRetention(t0, t1); err != nil {
			return errReply(400, "retention: %v", err)
		}
		if s.cfg.Retention != nil {
			if err := s.cfg.Retention(t0, t1); err != nil {
				return errReply(500, "retention applied but not saved: %v", err)
			}
		}
		st := s.cfg.DB.Stats()
		return jsonReply(map[string]int64{"tier0_seconds": int64(st.Tier0Retention.Seconds()), "tier1_seconds": int64(st.Tier1Retention.Seconds())})
	case messages.AgentPrune:
		n, err := s.cfg.DB.Prune(r.Prune.Chart, r.Prune.BeforeUnix)
		if errors.Is(err, store.ErrNotFound) {
			return errReply(404, "prune: chart %q not found", r.Prune.Chart)
		}
		if err != nil {
			return errReply(500, "prune: %v", err)
		}
		return jsonReply(map[string]any{"charts": n, "before": r.Prune.BeforeUnix})
	case messages.AgentFunctionsList:
		return jsonReply(map[string]any{"functions": s.Functions()})
	case messages.AgentFunctionsRun:
		if r.Function.Name == "processes" {
			// The REST API's process table (agent/procs: /proc read
			// directly, one scan a second shared by every caller).
			q := url.Values{}
			for k, v := range r.Function.Args {
				q.Set(k, v)
			}
			return s.get("/api/v3/processes?" + q.Encode())
		}
		f, ok := Functions[r.Function.Name]
		if !ok {
			return errReply(404, "no function %q (have %s)", r.Function.Name, strings.Join(FunctionNames(), ", "))
		}
		out, err := f.Run(ctx, r.Function.Args)
		if err != nil {
			return errReply(400, "%s: %v", r.Function.Name, err)
		}
		return jsonReply(out)
	case messages.AgentLogs:
		return s.logs(r.Logs)
	}
	return errReply(404, "unknown method %q", r.Method)
}

// get answers an /api/... GET through the REST handler in-process: the
// same code, caches and errors as HTTP, without a socket.
func (s *Server) get(path string) *messages.AgentReply {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI(path)
	req.Header.SetHost("127.0.0.1")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
	s.cfg.API(&ctx)
	resp := &ctx.Response
	rep := &messages.AgentReply{Status: resp.StatusCode(), ContentType: string(resp.Header.ContentType())}
	body := resp.Body()
	if rep.Status >= 400 {
		rep.Error = strings.TrimSpace(string(body))
	}
	rep.Body = append([]byte(nil), body...)
	return rep
}

// logs answers through the REST API's logs command in-process (one
// reader of the journal, the audit trail and the anomaly events for both
// doors); the role check for the source happened in allowed.
func (s *Server) logs(a *messages.AgentLogsArgs) *messages.AgentReply {
	switch a.Source {
	case "audit", "journal", "anomaly":
	default:
		return errReply(400, "logs source %q: want audit, journal or anomaly", a.Source)
	}
	q := url.Values{"source": {a.Source}}
	if a.Limit != 0 {
		q.Set("limit", strconv.Itoa(a.Limit))
	}
	return s.get("/api/v3/logs?" + q.Encode())
}

func shortKey(k string) string {
	if len(k) > 12 {
		return k[:12]
	}
	return k
}

func roleName(r string) string {
	if r == "" {
		return "unknown key"
	}
	return r
}
