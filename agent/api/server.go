package api

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/logs"
	"peerdns/agent/procs"
	"peerdns/agent/store"
	"peerdns/http/httpx"
	"peerdns/transport/identity"
)

// Version is the agent version shown by info, versions and allmetrics.
const Version = "0.5.0"

// CompatVersion is the Netdata release whose API layouts the agent follows.
const CompatVersion = "v1.37.1"

// Alerter is what the API reads from the health engine (*health.Engine).
type Alerter interface {
	Alerts() []health.Alert
	Transitions(after uint64) []health.Transition
}

// Collected is what allmetrics?source=as-collected reads: the newest
// values a chart was collected with, before rates and multipliers
// (*collect.Manager).
type Collected interface {
	Collected(chartID string) (at time.Time, raw []float64, ok bool)
}

// Options configure the API server.
type Options struct {
	DB        *store.DB
	Health    Alerter            // nil: no alerts
	Collected Collected          // nil: allmetrics has no as-collected source
	Identity  *identity.Identity // the agent's own key (peer key in / and tunnel)
	CORS      string             // Access-Control-Allow-Origin, sent as is; "" means "*" (AGENT_REST_CORS)
	Parent    bool               // AGENT_PARENT=1
	ExportDir string             // where export?write=1 writes
	Journal   bool               // AGENT_JOURNAL != 0: the journal log source is on
	// JournalDir reads journal files from this directory instead of the
	// system journal ("" for the system's; tests write their own).
	JournalDir string
	// Audit is the agent's audit trail (logs?source=audit); nil keeps one
	// in memory for this server's life.
	Audit *logs.Audit
	// Anomaly is the anomaly detector's event log (logs?source=anomaly);
	// nil answers "no anomaly detector running".
	Anomaly logs.Source
	DataDir string // the agent's data dir (shown in settings and db)
	Log     *slog.Logger
	// Peer is the admin RPC on the peer transport (nil: not listening).
	Peer PeerRPC
	// Fleet is the parent's view of its children (nil: not a parent).
	Fleet Fleet
	// RemoteWrite is the remote-write sender (nil: none), shown in settings.
	RemoteWrite StatusReporter
	// ML is the anomaly detector (ml_info; nil: none runs).
	ML MLState
	// Remote, when set, makes this server answer for a child node of a
	// parent: its identity replaces the local host's (Identity unused).
	Remote *RemoteHost
	// Now is the clock; nil means time.Now (tests pass a fixed one).
	Now func() time.Time
	// exportLimits bound export?write=1; zero means defaultExportLimits
	// (tests shrink them).
	exportLimits exportLimits
	// sendBudget bounds the answer bytes held for clients still being
	// written to; zero means defaultSendBudget (tests shrink it).
	sendBudget int64
	// renderWait is how long a request waits for a render slot; zero
	// means defaultRenderWait (tests shrink it).
	renderWait time.Duration
	// writeTimeout bounds the writing of an answer; zero means
	// defaultWriteTimeout (tests that hold an answer for a client that
	// never reads stretch it past their own pace).
	writeTimeout time.Duration
}

// Server answers the agent's REST API. Create it with New; it is safe for
// concurrent use.
type Server struct {
	o       Options
	log     *slog.Logger
	host    hostInfo
	started time.Time
	srv     *fasthttp.Server

	lnMu   sync.Mutex // guards ln and closed
	ln     net.Listener
	closed bool

	// statsCache keeps store.Stats for a second: it walks every chart
	// under its lock and the info/data paths need only its first/last times.
	statsMu   sync.Mutex
	statsAt   time.Time
	statsLast store.Stats

	procs        *procs.Sampler // the process table, scanned on demand
	logReader    logs.Reader
	ctxIndex     atomic.Pointer[contextIndex]
	dataCache    respCache
	prom         atomic.Pointer[promCache]     // per published chart list
	infoBody     [4]atomic.Pointer[cachedBody] // per API version (the body says which)
	lastPromSize atomic.Int64
	exportN      atomic.Uint64
	exportMu     sync.Mutex // serialises export writes and their pruning
	counters     struct {
		data, prom, shell, json, info atomic.Uint64
	}
	self   selfCounters  // what Stats reports (netdata.clients, requests, net, response_time)
	sends  sendBudget    // large answers held until their connection has written them
	render chan struct{} // render slots: answers computed at once (serveConn)
	// compressed is Handle with the answer compressed for a client that
	// accepts gzip, deflate or br.
	compressed fasthttp.RequestHandler
}

type cachedBody struct {
	at   int64
	body []byte
}

// New builds a server. DB is required.
func New(o Options) (*Server, error) {
	if o.DB == nil {
		return nil, errors.New("api: DB is required")
	}
	if o.Identity == nil && o.Remote == nil {
		return nil, errors.New("api: Identity is required")
	}
	if o.CORS == "" {
		o.CORS = "*"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.exportLimits == (exportLimits{}) {
		o.exportLimits = defaultExportLimits
	}
	if o.Audit == nil {
		a, err := logs.OpenAudit("", 0, o.Log)
		if err != nil {
			return nil, err
		}
		o.Audit = a
	}
	if o.sendBudget == 0 {
		o.sendBudget = defaultSendBudget
	}
	if o.renderWait == 0 {
		o.renderWait = defaultRenderWait
	}
	if o.writeTimeout == 0 {
		o.writeTimeout = defaultWriteTimeout
	}
	s := &Server{o: o, log: o.Log, started: o.Now(), procs: procs.NewSampler()}
	// Bodies are gzip/deflate-compressed for clients that ask (as Netdata
	// does; Prometheus always asks): a 1,300-series scrape shrinks about
	// 10x. serveConn compresses inside the render slot.
	s.compressed = fasthttp.CompressHandlerLevel(s.Handle, fasthttp.CompressBestSpeed)
	s.sends = sendBudget{max: o.sendBudget, held: map[net.Conn]int64{}}
	s.render = make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))
	if o.Remote != nil {
		s.host = o.Remote.hostInfo()
	} else {
		s.host = collectHostInfo(o.Identity)
	}
	s.logReader = logs.Reader{Audit: o.Audit, Anomaly: o.Anomaly}
	if o.Journal {
		s.logReader.Journal = &logs.Journal{Dir: o.JournalDir}
	}
	s.srv = &fasthttp.Server{
		Handler: s.serveConn,
		// A connection is idle (or closed) once its answer is written:
		// what it held of the send budget is free again.
		ConnState: func(c net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateIdle || st == fasthttp.StateClosed || st == fasthttp.StateHijacked {
				s.sends.release(c)
			}
		},
		Name:               "peerdns-agent/" + Version,
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       o.writeTimeout,
		IdleTimeout:        60 * time.Second,
		MaxRequestBodySize: 64 << 10,
		// Room for a request line with a 10 KB argument (a pasted log
		// query, a long dimension pattern): the handler answers it with a
		// 400 that names the argument, instead of fasthttp's bare 431
		// at the default 4 KiB.
		ReadBufferSize: 16 << 10,
		// One write syscall for a whole data answer or scrape: with the
		// default 4 KiB buffer a 4 KiB data answer took two writes.
		WriteBufferSize: 32 << 10,
		// A host agent serves a few dashboards and scrapers; past this many
		// connections at once fasthttp answers 503 instead of growing
		// memory on a small host.
		Concurrency:          4096,
		NoDefaultContentType: true,
		CloseOnShutdown:      true,
		// A keep-alive connection waiting for its next request gives
		// back its read and write buffers and its last answer's buffer
		// (fasthttp keeps all three by default, each as large as it
		// ever grew): 3,000 idle connections that had each been sent
		// a 169 KB answer held 650 MB of heap, 14 MB with this (3,500
		// sent 177 KB: 830 MB of RSS, 64 MB). The cost is
		// taking them from pools again on the connection's next request.
		ReduceMemoryUsage:             true,
		DisableHeaderNamesNormalizing: false,
		Logger:                        httpx.Logger{L: o.Log},
	}
	return s, nil
}

// Serve answers requests on ln until Shutdown. After Shutdown it returns
// at once (closing ln).
func (s *Server) Serve(ln net.Listener) error {
	s.lnMu.Lock()
	if s.closed {
		s.lnMu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln = ln
	s.lnMu.Unlock()
	err := s.srv.Serve(countingListener{ln, &s.self})
	s.lnMu.Lock()
	closed := s.closed
	s.lnMu.Unlock()
	if closed {
		return nil // the listener was closed by Shutdown
	}
	return err
}

// Shutdown stops accepting, lets requests in flight finish and returns.
// It also closes the listener itself: fasthttp's Shutdown only knows
// listeners its Serve has already registered, and a Shutdown racing a
// just-started Serve would otherwise leave Serve blocked forever.
func (s *Server) Shutdown() error {
	s.lnMu.Lock()
	s.closed = true
	ln := s.ln
	s.lnMu.Unlock()
	err := s.srv.Shutdown()
	if ln != nil {
		_ = ln.Close()
	}
	return err
}

func (s *Server) now() time.Time { return s.o.Now() }

func (s *Server) stats() store.Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	now := time.Now()
	if now.Sub(s.statsAt) >= time.Second {
		s.statsLast = s.o.DB.Stats()
		s.statsAt = now
	}
	return s.statsLast
}

func (s *Server) alerts() []health.Alert {
	if s.o.Health == nil {
		return nil
	}
	return s.o.Health.Alerts()
}

func (s *Server) transitions(after uint64) []health.Transition {
	if s.o.Health == nil {
		return nil
	}
	return s.o.Health.Transitions(after)
}

// handler answers one API command. ver is 1, 2 or 3 (0 for paths outside
// /api/vN).
type handler func(s *Server, ctx *fasthttp.RequestCtx, ver int) error

// commands maps the command name after /api/vN/ to its handler. Every
// command is served under every version: the spec lets the three prefixes
// share one engine, and a script written for one keeps working on another.
var commands map[string]handler

func init() {
	commands = map[string]handler{
		"info":                (*Server).info,
		"db":                  (*Server).dbInfo,
		"versions":            (*Server).versions,
		"me":                  (*Server).me,
		"settings":            (*Server).settings,
		"config":              (*Server).settings,
		"health":              (*Server).health,
		"contexts":            (*Server).contexts,
		"context":             (*Server).context,
		"charts":              (*Server).charts,
		"chart":               (*Server).chart,
		"q":                   (*Server).search,
		"search":              (*Server).search,
		"data":                (*Server).data,
		"allmetrics":          (*Server).allmetrics,
		"badge.svg":           (*Server).badge,
		"nodes":               (*Server).nodes,
		"node_instances":      (*Server).nodeInstances,
		"fleet":               (*Server).fleet,
		"stream_path":         (*Server).streamPath,
		"export":              (*Server).export,
		"tunnel":              (*Server).tunnel,
		"alerts":              (*Server).alertsAll,
		"alarms":              (*Server).alarms,
		"alarm_log":           (*Server).alarmLog,
		"alert_transitions":   (*Server).alarmLog,
		"alarms_values":       (*Server).alarmsValues,
		"alarm_count":         (*Server).alarmCount,
		"alert_config":        (*Server).alertConfig,
		"variable":            (*Server).variable,
		"alarm_variables":     (*Server).variable,
		"functions":           (*Server).functions,
		"weights":             (*Server).weights,
		"ai/snapshot":         (*Server).aiSnapshot,
		"ai/charts":           (*Server).aiCharts,
		"processes":           (*Server).processes,
		"logs":                (*Server).logs,
		"progress":            (*Server).progress,
		"stream_info":         (*Server).streamInfo,
		"ml_info":             (*Server).mlInfo,
		"dbengine_stats":      (*Server).dbengineStats,
		"metric_correlations": (*Server).metricCorrelations,
		"registry":            (*Server).registry,
	}
	// v2 and v3 answer these as Netdata's v2/v3 do; v1 keeps v1's shapes.
	for name, v2 := range map[string]handler{
		"contexts":          (*Server).contextsV2,
		"q":                 (*Server).searchV2,
		"alerts":            (*Server).alertsV2,
		"alert_transitions": (*Server).alertTransitionsV2,
		"alert_config":      (*Server).alertConfigV2,
		"functions":         (*Server).functionsV2,
		"me":                (*Server).meV3,
		"settings":          (*Server).settingsV3,
		"config":            (*Server).settingsV3,
		"versions":          (*Server).versionsV2,
	} {
		commands[name] = byVersion(commands[name], v2)
	}
}

// byVersion serves v1 with one handler and v2/v3 with another.
func byVersion(v1, v2 handler) handler {
	return func(s *Server, ctx *fasthttp.RequestCtx, ver int) error {
		if ver >= 2 {
			return v2(s, ctx, ver)
		}
		return v1(s, ctx, ver)
	}
}

// Handle is the fasthttp handler: CORS, OPTIONS preflight, routing and the
// one place errors are written.
//
// Routing is a hand switch over the path instead of fasthttp/router: every
// path is a fixed string under one of three version prefixes, and Netdata
// answers unknown commands with its own 404 text. Stripping the prefix and
// looking the command up in one map serves all three versions with one
// table and no per-request parameter allocations.
func (s *Server) Handle(ctx *fasthttp.RequestCtx) {
	defer s.self.request(time.Now())
	// /host/<name>/ names the node; without it the node filter
	// arguments may.
	h, switched, err := s.hostSwitch(ctx)
	if !switched {
		h, err = s.childHandler(ctx)
	}
	if h != nil {
		// The child's server answers with its own Options; the
		// CORS header is this server's, whichever node was asked.
		h(ctx)
		s.commonHeaders(ctx)
		return
	}
	if err == nil {
		err = s.route(ctx)
	}
	if err != nil {
		httpx.WriteError(ctx, s.log, err) // resets the response, headers too
	}
	if ctx.Response.StatusCode() == fasthttp.StatusMethodNotAllowed {
		ctx.Response.Header.Set("Allow", "GET, OPTIONS") // RFC 9110 §15.5.6
	}
	s.commonHeaders(ctx)
}

// serveConn is Handle for the server's own connections: a large answer
// is held in memory until the client has read it (up to WriteTimeout), so
// clients that ask for big answers and never read them could pin
// hundreds of megabytes (200 such connections held 700 MB). Answers of
// sendBudgetMin bytes or more count against a budget shared by all
// connections; past it the answer is a 503 (one answer alone always
// fits). The in-process REST tunnel calls Handle and is not counted.
//
// Answers are also computed a few at a time (twice GOMAXPROCS, at least
// 4): a request renders its whole answer in memory, so hundreds of large
// queries at once (read or not) would each hold megabytes of buffers
// together (200 at once: 300 MB); the handlers mostly use CPU, so more
// at once would not be faster. A request that finds no slot within
// renderWait is a 503. Compression is part of computing the answer: done
// after the slot is given back, 2,000 clients asking at once for a
// 177 KB answer each held a compressor and both copies of their answer
// together (300 MB).
func (s *Server) serveConn(ctx *fasthttp.RequestCtx) {
	if !s.renderSlot() {
		ctx.Error("The agent is busy answering other requests; retry later.\n", fasthttp.StatusServiceUnavailable)
		ctx.Response.Header.Set("Retry-After", "1")
		s.commonHeaders(ctx)
		return
	}
	s.compressed(ctx)
	<-s.render
	n := int64(len(ctx.Response.Body()))
	if n < sendBudgetMin || ctx.Conn() == nil {
		return
	}
	if !s.sends.acquire(ctx.Conn(), n) {
		cors := string(ctx.Response.Header.Peek("Access-Control-Allow-Origin"))
		ctx.Response.Reset()
		ctx.Response.Header.Set("Access-Control-Allow-Origin", cors)
		ctx.Response.Header.Set("Cache-Control", "no-cache, no-store, must-revalidate")
		ctx.Response.Header.Set("Retry-After", "10")
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("Too many large answers are being sent to clients that have not read them; retry later or ask for a narrower window.\n")
	}
}

// defaultWriteTimeout is how long an answer may take to be written:
// past it, the connection of a client that does not read is closed and
// what its answer held of the send budget is free again.
const defaultWriteTimeout = 10 * time.Second

// defaultRenderWait is how long a request waits for a render slot.
const defaultRenderWait = 5 * time.Second

// renderSlot takes one of the render slots, waiting up to renderWait.
func (s *Server) renderSlot() bool {
	select {
	case s.render <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(s.o.renderWait)
	defer t.Stop()
	select {
	case s.render <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// sendBudgetMin is the smallest answer counted against the send budget:
// info, charts, scrapes and dashboard queries are below or near it.
const sendBudgetMin = 256 << 10

// defaultSendBudget is how many bytes of large answers may wait for their
// clients at once.
const defaultSendBudget = 64 << 20

// sendBudget counts the answer bytes each connection holds until it has
// written them.
type sendBudget struct {
	mu    sync.Mutex
	max   int64
	total int64
	held  map[net.Conn]int64
}

// acquire counts n bytes for c; false when that would pass the budget
// (unless nothing else is held: one answer alone is always sent).
func (b *sendBudget) acquire(c net.Conn, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total > 0 && b.total+n > b.max {
		return false
	}
	b.total += n
	b.held[c] += n
	return true
}

// release frees what c held.
func (b *sendBudget) release(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.held[c]; ok {
		b.total -= n
		delete(b.held, c)
	}
}

// commonHeaders sets the CORS and caching headers of every answer.
//
// Access-Control-Allow-Origin is the configured value ("*" by default, or
// exactly AGENT_REST_CORS). Netdata echoes the request's Origin and adds
// Allow-Credentials: true, which lets any page read the API with the
// user's cookies; this agent never echoes and never allows credentials
// (it has no cookies to protect, and a fixed value cannot be widened by a
// request).
func (s *Server) commonHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Access-Control-Allow-Origin", s.o.CORS)
	if !ctx.IsOptions() {
		h.Set("Cache-Control", "no-cache, no-store, must-revalidate")
		h.Set("Pragma", "no-cache")
	}
}

func (s *Server) route(ctx *fasthttp.RequestCtx) error {
	if ctx.IsOptions() {
		h := &ctx.Response.Header
		h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "accept, x-requested-with, origin, content-type, cookie, pragma, cache-control, x-auth-token")
		h.Set("Access-Control-Max-Age", "1209600")
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("OK")
		return nil
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		return httpx.Errorf(fasthttp.StatusMethodNotAllowed, "Method not allowed: %s (the agent API is read-only, use GET)", ctx.Method())
	}
	path := ctx.Path()
	switch string(path) {
	case "/", "/api", "/api/":
		return s.index(ctx, 0)
	case "/health":
		return s.health(ctx, 0)
	}
	rest, ok := bytes.CutPrefix(path, []byte("/api/v"))
	if !ok {
		return httpx.Errorf(fasthttp.StatusNotFound, "Not found: %s", path)
	}
	slash := bytes.IndexByte(rest, '/')
	verText := rest
	if slash >= 0 {
		verText = rest[:slash]
	}
	ver := 0
	switch string(verText) {
	case "1":
		ver = 1
	case "2":
		ver = 2
	case "3":
		ver = 3
	default:
		return httpx.Errorf(fasthttp.StatusNotFound, "Unsupported API version: v%s", trimArg(string(verText)))
	}
	cmd := ""
	if slash >= 0 {
		cmd = string(rest[slash+1:])
	}
	cmd = strings.TrimSuffix(cmd, "/")
	if id, ok := strings.CutPrefix(cmd, "ai/chart/"); ok {
		if id, ok = strings.CutSuffix(id, "/summary"); ok {
			return s.aiChartSummary(ctx, id)
		}
	}
	h, ok := commands[cmd]
	if !ok {
		if cmd == "" {
			return httpx.Errorf(fasthttp.StatusNotFound, "Unsupported v%d API command:", ver)
		}
		return httpx.Errorf(fasthttp.StatusNotFound, "Unsupported v%d API command: %s", ver, trimArg(cmd))
	}
	return h(s, ctx, ver)
}

// arg returns a query argument as a string and whether it is present.
func arg(ctx *fasthttp.RequestCtx, key string) (string, bool) {
	args := ctx.QueryArgs()
	v := args.Peek(key)
	if v == nil {
		if !args.Has(key) {
			return "", false
		}
		return "", true
	}
	return string(v), true
}

// trimArg shortens an argument echoed in an error message.
func trimArg(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func argOr(ctx *fasthttp.RequestCtx, key, def string) string {
	if v, ok := arg(ctx, key); ok && v != "" {
		return v
	}
	return def
}

// yes reads a boolean query argument: yes, 1, true and on are true, any
// other value false, and a missing or empty one def.
func yes(ctx *fasthttp.RequestCtx, key string, def bool) bool {
	v, ok := arg(ctx, key)
	if !ok || v == "" {
		return def
	}
	switch strings.ToLower(v) {
	case "yes", "1", "true", "on":
		return true
	}
	return false
}

// bufPool holds render buffers of the hot endpoints (data, allmetrics).
// SetBody copies, so a buffer goes back to the pool right after.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > pooledBody {
		return // do not keep rare huge buffers alive
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// pooledBody is the largest body kept in a pool (bufPool, fasthttp's
// response body pool). Pools hold what was put in them until two
// collections have passed, and an idle agent collects rarely: a hundred
// clients asking for a 1.7 MB answer at once left ~160 MB of pooled
// bodies and ~300 MB of RSS behind them.
const pooledBody = 256 << 10

func setBody(ctx *fasthttp.RequestCtx, contentType string, body []byte) {
	ctx.SetContentType(contentType)
	if len(body) > pooledBody {
		// A body of its own, freed with the response, instead of a
		// pooled buffer grown to this size.
		ctx.Response.SetBodyRaw(append([]byte(nil), body...))
		return
	}
	ctx.SetBody(body)
}
