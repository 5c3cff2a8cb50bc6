// Package metrics is the node's Prometheus endpoint, GET /metrics on the
// admin address (and through the admin domain on the edge like the rest
// of the admin API). The composition root registers it with Register.
package metrics

import (
	"bytes"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/miekg/dns"

	"github.com/asynkron/protoactor-go/actor"

	nodedns "peerdns/dns"
	"peerdns/http/admin"
	"peerdns/http/httpx"
	"peerdns/http/proxy"
	"peerdns/internal/view"
	"peerdns/messages"
)

// Deps are what a scrape reads.
type Deps struct {
	Version                string
	View                   *view.Published
	DNS                    *nodedns.Server
	Edge                   func() *proxy.Server // the running edge; nil: none
	AdminRequests          func() admin.RequestCounters
	Root                   *actor.RootContext
	Tunnels, Peers, Ledger *actor.PID
	Log                    *slog.Logger
}

// Prometheus metrics (GET /metrics on the admin address, and through the
// admin domain on the edge like the rest of the admin API).
//
// The exposition is the official client's (prometheus/client_golang):
// its registry, its text and protobuf encoders and content negotiation,
// its Go runtime and process collectors. What the node adds is one
// collector (nodeCollector) that reads, at scrape time, the counters the
// hot paths keep anyway: the DNS readers' atomic arrays, the edge's
// per-route atomics, the admin API's totals. Nothing on a request path
// calls into Prometheus, takes a lock or allocates for it.
//
// What only an actor knows (tunnels, peers, the ledger) is asked for by
// message, at most once per actorEvery: a reading younger than that is
// reused. A gather, and each encoded answer of it, is reused for
// gatherEvery (scrapeCache), and at most
// maxScrapes scrapes are served at once (more get a 503), so a client
// scraping a hundred times a second costs a bounded amount of CPU and
// never reaches the DNS readers at all.
const (
	actorEvery  = time.Second
	gatherEvery = 100 * time.Millisecond
	maxScrapes  = 4
)

// peerPath is the label `path` of a peer: how its session reaches it
// (direct, punched, tcp or relayed, from the peer diagnostics); a peer
// without a session (disconnected) has the path "none".
func peerPath(d messages.PeerDiag) string {
	if d.State == "disconnected" {
		return "none"
	}
	if d.Path == "" {
		return "direct"
	}
	return d.Path // direct, punched, tcp or relayed
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("peerdns_"+name, help, labels, nil)
}

var (
	// DNS.
	dnsQueries    = desc("dns_queries_total", "DNS queries read, over UDP, TCP, DoT and DoH.")
	dnsResponses  = desc("dns_responses_total", "DNS responses built, by where the answer came from and response code.", "source", "rcode")
	dnsFast       = desc("dns_fast_responses_total", "DNS responses written from pre-packed answers without unpacking the query.")
	dnsDropped    = desc("dns_dropped_total", "DNS packets not answered: responses, runts, overload.")
	dnsRRLDropped = desc("dns_rrl_dropped_total", "UDP responses to clients outside the recursion ACL dropped by the response-rate limit.")
	dnsRRLSlipped = desc("dns_rrl_slipped_total", "UDP responses to clients outside the recursion ACL sent truncated by the response-rate limit.")
	dnsRecRefused = desc("dns_recursion_refused_total", "Queries refused because only recursion would answer them and the client gets none.")
	dnsStreamFull = desc("dns_stream_connections_refused_total", "TCP and DNS-over-TLS connections closed at once because their listener held its maximum of open connections.")
	dnsStreamAddr = desc("dns_stream_connections_share_refused_total", "TCP and DNS-over-TLS connections closed at once because their address (an IPv6 client's /64) held its share of the listener's maximum.")
	dnsUpLatency  = desc("dns_upstream_duration_seconds", "Round-trip time of each exchange with an upstream server, failures and timeouts included.")
	dnsUpFwd      = desc("dns_upstream_queries_total", "Questions sent to upstream servers (each server tried counts).")
	dnsUpFail     = desc("dns_upstream_failures_total", "Questions no upstream server answered.")
	dnsCacheHits  = desc("dns_cache_hits_total", "Upstream cache hits on the resolver path.")
	dnsCacheMiss  = desc("dns_cache_misses_total", "Upstream cache misses on the resolver path.")
	dnsCacheSize  = desc("dns_cache_entries", "Answers held in the upstream cache.")

	// Edge proxy.
	edgeRequests  = desc("edge_requests_total", "Edge proxy requests, by route and HTTP status code.", "route", "code")
	edgeReqBytes  = desc("edge_request_bytes_total", "Request body bytes the edge proxy received, as declared by Content-Length.", "route")
	edgeRespBytes = desc("edge_response_bytes_total", "Response body bytes the edge proxy sent (a streamed body as its upstream declared it).", "route")
	edgeConns     = desc("edge_open_connections", "Client connections open on the edge's HTTP and HTTPS listeners.")
	edgeTLS       = desc("edge_tls_handshakes_total", "TLS handshakes on the edge's HTTPS address, over TCP and QUIC (HTTP/3), by result.", "result")
	edgeLogDrop   = desc("edge_access_log_dropped_total", "Edge access-log lines dropped because the log buffer was full.")
	edgeBodyRef   = desc("edge_body_budget_refused_total", "Edge requests refused with 503 because a large body did not fit the memory budget.")
	edgeMuxConns  = desc("edge_multiplexed_connections", "Client connections open on the edge in HTTP/2 (on TLS) and HTTP/3 (on QUIC), by protocol.", "protocol")
	edgeH2Errors  = desc("edge_http2_protocol_errors_total", "HTTP/2 stream and connection errors net/http's server counted on the edge: frames the protocol forbids, a rapid reset past the handler queue.")
	edgeH2Conn    = desc("edge_http2_connection_errors_total", "HTTP/2 connections the edge closed with an error code (GOAWAY): CONTINUATION floods, header blocks that do not decode, and the protocol errors above that end a connection.")
	edgeH3Retries = desc("edge_http3_retries_total", "QUIC Retry packets (address validation) the edge sent to new HTTP/3 connections because they came faster than its handshake rate.")
	edgeH3Stuck   = desc("edge_http3_stuck_closed_total", "HTTP/3 connections the edge closed because they held streams whose request head never came, with no request running, for the idle and read timeouts.")
	edgeOverShare = desc("edge_connections_share_refused_total", "Client connections the edge closed at once because their address (an IPv6 client's /64) held its share of the connection cap.")
	edgeH3AtCap   = desc("edge_http3_refused_at_cap_total", "HTTP/3 connections the edge closed at once because it held its maximum of client connections (TCP and QUIC together); their clients go on over TCP.")
	edgeStalled   = desc("edge_streams_stalled_total", "HTTP/2 and HTTP/3 streams reset because their client took nothing of the answer for the write timeout.")

	// Admin API.
	adminRequests = desc("admin_requests_total", "Admin API requests, by result (failed: a 5xx).", "result")

	// Tunnels.
	tunnelInfo    = desc("tunnel_info", "One series per tunnel server and client, with its state.", "kind", "tunnel", "state")
	tunnelConns   = desc("tunnel_connections", "Connections open through a tunnel.", "kind", "tunnel")
	tunnelStreams = desc("tunnel_streams_total", "Connections carried by a tunnel since it started, each over its own QUIC stream.", "kind", "tunnel")
	tunnelBytes   = desc("tunnel_bytes_total", "Bytes carried by a tunnel: in from the network to the local side, out from the local side.", "kind", "tunnel", "direction")

	// Peers.
	peersByPath   = desc("peers", "Known peers, by path and connection state.", "path", "state")
	peerRTT       = desc("peer_rtt_seconds", "Smoothed round-trip time to a connected peer.", "peer", "path")
	peerPktSent   = desc("peer_quic_packets_sent_total", "QUIC packets sent to a connected peer since its connection started (QUIC paths only).", "peer", "path")
	peerPktLost   = desc("peer_quic_packets_lost_total", "QUIC packets to a connected peer declared lost and sent again since its connection started: drops on the way, at the peer's socket or in its QUIC stack's queue.", "peer", "path")
	peerCwnd      = desc("peer_quic_congestion_window_bytes", "Bytes the congestion controller lets the node have in flight to a connected peer.", "peer", "path")
	peerAttempts  = desc("peer_dial_attempts_total", "Outbound connection attempts to peers.")
	peerDialFail  = desc("peer_dial_failures_total", "Outbound connection attempts to peers that failed.")
	peerInbound   = desc("peer_inbound_accepted_total", "Inbound peer connections accepted.")
	peerGRO       = desc("peer_udp_gro", "1 when the peer transport's UDP socket reads datagrams the kernel merged (UDP receive offload), 0 when it reads packet by packet (another system, an old kernel, PEERDNS_DISABLE_GRO).")
	peerGROMerged = desc("peer_udp_gro_merged_total", "Merged datagrams the peer transport read, each carrying several QUIC packets.")
	peerSendLoss  = desc("peer_send_losses_total", "UDP datagrams of the peer transport the host refused to send (a firewall's output drop, a full conntrack table, no buffers), counted as lost; the connections live on.")
	peerRefused   = desc("peer_refused_total", "Peer connections refused (not a writer of the network, bad proof, too many pending).")
	peerOps       = desc("peer_ops_total", "Ledger ops exchanged with peers, by direction (sent, received, duplicate: received ops the ledger already had).", "direction")

	// Ledger and consensus.
	ledgerOps      = desc("ledger_ops", "Ops applied to the ledger and held in it.")
	ledgerRefused  = desc("ledger_ops_refused_total", "Ops refused by the ledger (forged, replayed or unauthorised) since the node started.")
	ledgerDomains  = desc("ledger_domains", "Domains with at least one claim in the ledger.")
	consResolved   = desc("consensus_resolutions_total", "Consensus runs that resolved a domain.")
	consQuorumFail = desc("consensus_quorum_failures_total", "Consensus runs without a quorum of active peers.")
	consTies       = desc("consensus_ties_total", "Consensus runs that ended in a tie.")
	consVotes      = desc("consensus_votes", "Votes counted over all domains in the latest consensus results.")

	buildInfo   = desc("build_info", "Always 1; the version of the running node.", "version")
	viewVersion = desc("view_version", "Version of the published view of resolved domains that DNS and the edge answer from.")
)

// actorReading is what the collector asked the actors; ok says which
// parts answered in time.
type actorReading struct {
	servers             []messages.TunnelServer
	clients             []messages.TunnelClient
	serversOK, clientOK bool
	peers               *messages.PeerDiagnosticsReply
	consensus           *messages.ConsensusMetrics
}

// nodeCollector is the node's prometheus.Collector.
type nodeCollector struct {
	d Deps

	mu     sync.Mutex // guards the reading below; never held by a request path
	at     time.Time
	actors actorReading
}

var _ prometheus.Collector = (*nodeCollector)(nil)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		dnsQueries, dnsResponses, dnsFast, dnsDropped, dnsRRLDropped, dnsRRLSlipped, dnsRecRefused, dnsStreamFull, dnsStreamAddr, dnsUpLatency, dnsUpFwd, dnsUpFail,
		dnsCacheHits, dnsCacheMiss, dnsCacheSize,
		edgeRequests, edgeReqBytes, edgeRespBytes, edgeConns, edgeTLS, edgeLogDrop, edgeBodyRef, edgeMuxConns, edgeH2Errors, edgeH2Conn, edgeH3Retries, edgeH3Stuck, edgeStalled, edgeOverShare, edgeH3AtCap,
		adminRequests,
		tunnelInfo, tunnelConns, tunnelStreams, tunnelBytes,
		peersByPath, peerRTT, peerPktSent, peerPktLost, peerCwnd, peerAttempts, peerDialFail, peerInbound, peerRefused, peerSendLoss, peerGRO, peerGROMerged, peerOps,
		ledgerOps, ledgerRefused, ledgerDomains, consResolved, consQuorumFail, consTies, consVotes,
		buildInfo, viewVersion,
	} {
		ch <- d
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v int64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.d
	gauge(ch, buildInfo, 1, n.Version)
	if v := n.View.Load(); v != nil {
		gauge(ch, viewVersion, float64(v.Version))
	}
	c.collectDNS(ch)
	c.collectEdge(ch)
	a := n.AdminRequests()
	counter(ch, adminRequests, a.Total-a.Failed, "ok")
	counter(ch, adminRequests, a.Failed, "failed")
	r := c.reading()
	c.collectTunnels(ch, r)
	c.collectPeers(ch, r)
	if m := r.consensus; m != nil {
		gauge(ch, ledgerOps, float64(m.Sidecar.Length))
		counter(ch, ledgerRefused, int64(m.ValidationFailures))
		gauge(ch, ledgerDomains, float64(m.Sidecar.DomainCount))
		counter(ch, consResolved, int64(m.Resolutions))
		counter(ch, consQuorumFail, int64(m.QuorumFailures))
		counter(ch, consTies, int64(m.Ties))
		gauge(ch, consVotes, float64(m.TotalVotes))
	}
}

func (c *nodeCollector) collectDNS(ch chan<- prometheus.Metric) {
	d := c.d.DNS
	st := d.Stats()
	counter(ch, dnsQueries, st.Queries)
	counter(ch, dnsFast, st.FastAnswers)
	counter(ch, dnsDropped, st.Dropped)
	counter(ch, dnsRRLDropped, st.RateLimited)
	counter(ch, dnsRRLSlipped, st.RateLimitSlipped)
	counter(ch, dnsRecRefused, st.RecursionRefused)
	counter(ch, dnsStreamFull, st.StreamConnsRefused)
	counter(ch, dnsStreamAddr, st.StreamConnsOverShare)
	counter(ch, dnsCacheHits, st.CacheHits)
	counter(ch, dnsCacheMiss, st.CacheMisses)
	gauge(ch, dnsCacheSize, float64(st.CacheSize))
	for _, a := range d.AnswerCounts() {
		counter(ch, dnsResponses, a.Count, a.Source.String(), rcodeName(a.Rcode))
	}
	up := d.UpstreamStats()
	counter(ch, dnsUpFwd, up.Forwarded)
	counter(ch, dnsUpFail, up.Failures)
	lat := d.UpstreamLatency()
	ch <- prometheus.MustNewConstHistogram(dnsUpLatency, lat.Count, lat.Sum, lat.Cumulative)
}

// rcodeName is the rcode's mnemonic (NOERROR, NXDOMAIN, ...). miekg/dns
// names 16 BADSIG, the TSIG meaning; a server answering a query means
// BADVERS (RFC 6891).
func rcodeName(rc int) string {
	switch rc {
	case dns.RcodeBadVers:
		return "BADVERS"
	case nodedns.RcodeOther:
		return "other"
	}
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return strconv.Itoa(rc)
}

func (c *nodeCollector) collectEdge(ch chan<- prometheus.Metric) {
	if c.d.Edge == nil {
		return
	}
	p := c.d.Edge()
	if p == nil {
		return
	}
	m := p.Metrics()
	for _, r := range m.Requests {
		counter(ch, edgeRequests, r.Count, r.Route.String(), strconv.Itoa(r.Status))
	}
	for _, b := range m.Bytes {
		counter(ch, edgeReqBytes, b.In, b.Route.String())
		counter(ch, edgeRespBytes, b.Out, b.Route.String())
	}
	gauge(ch, edgeConns, float64(m.OpenConns))
	counter(ch, edgeTLS, m.TLSHandshakes, "ok")
	counter(ch, edgeTLS, m.TLSNoCertificate, "no_certificate")
	cn := p.Counters()
	counter(ch, edgeLogDrop, cn.AccessDropped)
	counter(ch, edgeBodyRef, cn.BodyRefused)
	counter(ch, edgeOverShare, cn.ConnsOverShare)
	gauge(ch, edgeMuxConns, float64(cn.H2Conns), "h2")
	gauge(ch, edgeMuxConns, float64(cn.H3Conns), "h3")
	counter(ch, edgeH2Errors, cn.H2Errors)
	counter(ch, edgeH2Conn, cn.H2ConnErrors)
	counter(ch, edgeH3Retries, cn.H3Retries)
	counter(ch, edgeH3Stuck, cn.H3Stuck)
	counter(ch, edgeH3AtCap, cn.H3AtCap)
	counter(ch, edgeStalled, cn.H2Stalled)
}

func (c *nodeCollector) collectTunnels(ch chan<- prometheus.Metric, r actorReading) {
	one := func(kind, id, state string, tc messages.TunnelCounters) {
		gauge(ch, tunnelInfo, 1, kind, id, state)
		gauge(ch, tunnelConns, float64(tc.ConnectionsOpen), kind, id)
		counter(ch, tunnelStreams, tc.ConnectionsTotal, kind, id)
		counter(ch, tunnelBytes, tc.BytesIn, kind, id, "in")
		counter(ch, tunnelBytes, tc.BytesOut, kind, id, "out")
	}
	for _, s := range r.servers {
		one("server", s.ID, s.Info.State, s.Info.TunnelCounters)
	}
	for _, cl := range r.clients {
		one("client", cl.ID, cl.Info.State, cl.Info.TunnelCounters)
	}
}

func (c *nodeCollector) collectPeers(ch chan<- prometheus.Metric, r actorReading) {
	p := r.peers
	if p == nil {
		return
	}
	type key struct{ path, state string }
	counts := map[key]int{}
	for _, d := range p.Peers {
		path := peerPath(d)
		counts[key{path, d.State}]++
		if d.State == "connected" && d.RTTMillis > 0 {
			gauge(ch, peerRTT, d.RTTMillis/1000, d.ID, path)
		}
		if q := d.QUIC; d.State == "connected" && q != nil {
			counter(ch, peerPktSent, int64(q.PacketsSent), d.ID, path)
			counter(ch, peerPktLost, int64(q.PacketsLost), d.ID, path)
			gauge(ch, peerCwnd, float64(q.CongestionWindow), d.ID, path)
		}
	}
	// Connected direct peers are always there, zero or not, so a graph
	// or an alert on them exists before the first peer connects.
	if _, ok := counts[key{"direct", "connected"}]; !ok {
		counts[key{"direct", "connected"}] = 0
	}
	for k, v := range counts {
		gauge(ch, peersByPath, float64(v), k.path, k.state)
	}
	s := p.Summary
	counter(ch, peerAttempts, s.ConnectionAttempts)
	counter(ch, peerDialFail, s.FailedAttempts)
	counter(ch, peerInbound, s.InboundAccepted)
	counter(ch, peerRefused, s.Refused+s.RefusedPending)
	if s.Paths != nil {
		counter(ch, peerSendLoss, s.Paths.SendLosses)
		gro := 0.0
		if s.Paths.UDPGRO {
			gro = 1
		}
		gauge(ch, peerGRO, gro)
		counter(ch, peerGROMerged, s.Paths.GROMerged)
	}
	counter(ch, peerOps, s.OpsSent, "sent")
	counter(ch, peerOps, s.OpsReceived, "received")
	counter(ch, peerOps, s.OpsDuplicate, "duplicate")
}

// reading is the actors' latest answers, asked again once the last
// reading is actorEvery old. Concurrent scrapes wait for one asker.
func (c *nodeCollector) reading() actorReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < actorEvery {
		return c.actors
	}
	n := c.d
	root := n.Root
	var r actorReading
	if rep, err := httpx.Ask[*messages.GetTunnelServersReply](root, n.Tunnels, &messages.GetTunnelServers{}, time.Second); err == nil && rep.Err == nil {
		r.servers, r.serversOK = rep.Servers, true
	}
	if rep, err := httpx.Ask[*messages.GetTunnelClientsReply](root, n.Tunnels, &messages.GetTunnelClients{}, time.Second); err == nil && rep.Err == nil {
		r.clients, r.clientOK = rep.Clients, true
	}
	if rep, err := httpx.Ask[*messages.PeerDiagnosticsReply](root, n.Peers, &messages.GetPeerDiagnostics{}, time.Second); err == nil {
		r.peers = rep
	}
	if rep, err := httpx.Ask[*messages.GetConsensusMetricsReply](root, n.Ledger, &messages.GetConsensusMetrics{}, time.Second); err == nil {
		m := rep.Metrics
		r.consensus = &m
	}
	c.actors, c.at = r, time.Now()
	return r
}

// cachedGatherer reuses one gather for every scrape within gatherEvery.
// The metric families are only read by the encoders, so scrapes share
// them.
type cachedGatherer struct {
	g     prometheus.Gatherer
	mu    sync.Mutex
	at    time.Time
	fams  []*dto.MetricFamily
	err   error
	every time.Duration
}

func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.every {
		c.fams, c.err = c.g.Gather()
		c.at = time.Now()
	}
	return c.fams, c.err
}

// newRegistry is the node's registry: its own collector, Go's runtime
// and the process.
func newRegistry(d Deps) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		&nodeCollector{d: d},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Register registers GET /metrics.
func Register(r *router.Router, d Deps) {
	reg := newRegistry(d)
	h := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(&cachedGatherer{g: reg, every: gatherEvery}, promhttp.HandlerOpts{
		ErrorLog:            promLogger{d.Log},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: maxScrapes,
		// No Timeout: promhttp's would wrap the request's context, which
		// here is fasthttp's RequestCtx, whose Done races with the
		// server's Shutdown. A gather is bounded anyway: each actor ask
		// has a one-second deadline, the rest reads atomics.
		// Plain text even when the client asks for gzip (Prometheus
		// does): compress/flate allocates about 0.8 MB of state per
		// writer, a fresh one per scrape once a GC has emptied
		// promhttp's pool, against an exposition of a few tens of KB
		// on an address that is loopback unless the operator moves it.
		// Measured in the soak, that writer was the largest allocation
		// of the node's hour and set its heap's peaks.
		DisableCompression: true,
	}))
	c := &scrapeCache{every: gatherEvery}
	r.GET("/metrics", func(ctx *fasthttp.RequestCtx) {
		if c.serve(ctx) {
			return
		}
		h(ctx)
		c.keep(ctx)
	})
}

// scrapeCache keeps the encoded answers of the last gatherEvery, one per
// (Accept, gzip or not): within that time a scrape is a copy of bytes, so
// a client scraping a hundred times a second costs the node about ten
// encodings a second, not a hundred.
type scrapeCache struct {
	every   time.Duration
	mu      sync.Mutex
	at      time.Time
	answers map[string]cachedScrape
}

type cachedScrape struct {
	ctype, cenc string
	body        []byte
}

// maxCachedScrapes bounds the answers kept per period: the key holds the
// client's Accept header, so what a client sends cannot grow the map.
const maxCachedScrapes = 4

func scrapeKey(ctx *fasthttp.RequestCtx) string {
	gz := bytes.Contains(ctx.Request.Header.Peek("Accept-Encoding"), []byte("gzip"))
	return strconv.FormatBool(gz) + "\x00" + string(ctx.Request.Header.Peek("Accept"))
}

// serve answers ctx from the cache when it can.
func (c *scrapeCache) serve(ctx *fasthttp.RequestCtx) bool {
	key := scrapeKey(ctx)
	c.mu.Lock()
	a, ok := c.answers[key]
	fresh := time.Since(c.at) < c.every
	c.mu.Unlock()
	if !ok || !fresh {
		return false
	}
	ctx.SetContentType(a.ctype)
	if a.cenc != "" {
		ctx.Response.Header.Set("Content-Encoding", a.cenc)
	}
	ctx.SetBody(a.body)
	return true
}

// keep stores a 200 answer for the rest of the period.
func (c *scrapeCache) keep(ctx *fasthttp.RequestCtx) {
	if ctx.Response.StatusCode() != fasthttp.StatusOK {
		return
	}
	key := scrapeKey(ctx)
	a := cachedScrape{ctype: string(ctx.Response.Header.ContentType()), cenc: string(ctx.Response.Header.Peek("Content-Encoding")),
		body: append([]byte(nil), ctx.Response.Body()...)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= c.every {
		c.answers, c.at = map[string]cachedScrape{}, time.Now()
	}
	if len(c.answers) < maxCachedScrapes {
		c.answers[key] = a
	}
}

// promLogger sends the Prometheus handler's errors to the log.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	if l.log != nil {
		l.log.Warn("metrics", "err", v)
	}
}
