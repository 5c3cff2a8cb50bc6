//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/miekg/dns"

	"peerdns/transport"
)

// localRec is what the workload did to one local record name on one
// node.
type localRec struct {
	values    map[string]bool // every value ever written or tried (answers must be one of these)
	acked     string          // the value of the last acknowledged write; "" after an acknowledged delete
	ackedAny  bool            // some write was acknowledged
	uncertain bool            // a write after the last acknowledged one has an unknown outcome
}

// record is the workload's own record of what it did and what each node
// acknowledged or answered; the checker reads only this and the nodes.
type record struct {
	mu      sync.Mutex
	claims  map[string]string // acknowledged claims: domain → hash
	tried   []string          // every claim sent, in order
	removed map[string]bool   // acknowledged removals
	unknown map[string]bool   // claims or removals whose outcome is unknown
	ops     int

	local      []map[string]*localRec // node → local record name → its history
	localNames [][]string             // node → the names of local, in order
	localOps   int

	// Tunnel traffic through the clients on nodes 1..n-1 to the echo
	// service behind node 0: round trips that came back intact, failed
	// (no connection, reset: expected under faults) or came back
	// different (never allowed).
	tunOK, tunFail, tunBytes int
	tunCorrupt               []string
	tunLastOK                []time.Time // per node

	// WebSocket subscribers, one per node.
	wsConnects, wsMsgs []int
	wsLastHint         []time.Time // last update-database hint, per node
	wsBad              []string    // messages that did not parse or had no type

	// DNS queries to every node during the run.
	dnsQueries, dnsAnswered, dnsFailed int
	dnsBad                             []string
	ifaces                             []map[string]map[string]bool // node → domain → IPs seen in its /api/interfaces
}

func newRecord(n int) *record {
	r := &record{claims: map[string]string{}, removed: map[string]bool{}, unknown: map[string]bool{},
		tunLastOK: make([]time.Time, n), wsConnects: make([]int, n), wsMsgs: make([]int, n), wsLastHint: make([]time.Time, n)}
	for i := 0; i < n; i++ {
		r.local = append(r.local, map[string]*localRec{})
		r.localNames = append(r.localNames, nil)
		r.ifaces = append(r.ifaces, map[string]map[string]bool{})
	}
	return r
}

// bad keeps the first few violations of one kind (and counts the rest
// in the last line), so a run that goes wrong does not print thousands.
func bad(list *[]string, s string) {
	switch {
	case len(*list) < 20:
		*list = append(*list, s)
	case len(*list) == 20:
		*list = append(*list, "(more left out)")
	}
}

// workload claims new domains on its node and removes some of its own
// acknowledged ones, as a user of that node's admin API would, and
// records every outcome.
func workload(ctx context.Context, n *node, rec *record, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	var mine []string
	for seq := 0; transport.Wait(ctx, time.Duration(100+rng.Intn(200))*time.Millisecond); seq++ {
		if len(mine) > 0 && rng.Intn(5) == 0 {
			k := rng.Intn(len(mine))
			d := mine[k]
			mine = append(mine[:k], mine[k+1:]...)
			code, _, err := n.call("POST", "/api/remove-domain", `{"domain":"`+d+`"}`)
			rec.mu.Lock()
			rec.ops++
			switch {
			case code == 200:
				rec.removed[d] = true
			case err != nil || (code >= 500 && code != 507):
				// A timeout or a failure half way: the removal may have
				// been signed.
				rec.unknown[d] = true
			}
			// 403, 507 and other refusals: nothing was written, the claim stays.
			rec.mu.Unlock()
			continue
		}
		d := fmt.Sprintf("w%d-%05d.p2p", n.i, seq)
		hash := "hs://" + fmt.Sprintf("%064x", rng.Uint64())
		rec.mu.Lock()
		rec.tried = append(rec.tried, d)
		rec.mu.Unlock()
		code, _, err := n.call("POST", "/api/add-domain", `{"domain":"`+d+`","hash":"`+hash+`"}`)
		rec.mu.Lock()
		rec.ops++
		switch {
		case code == 200:
			rec.claims[d] = hash
			mine = append(mine, d)
		case err != nil || (code >= 500 && code != 507):
			rec.claims[d] = hash
			rec.unknown[d] = true // it may have been written
		}
		rec.mu.Unlock()
	}
}

// localWorkload adds, changes and deletes local DNS records on its node
// (names l<node>-<seq>.chaos.lan, A records in 198.51.100.0/24) and
// records every value it wrote or tried to write.
func localWorkload(ctx context.Context, n *node, rec *record, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	var names []string
	for seq := 0; transport.Wait(ctx, time.Duration(200+rng.Intn(400))*time.Millisecond); seq++ {
		value := fmt.Sprintf("198.51.100.%d", 1+rng.Intn(254))
		var name, path, body string
		op := rng.Intn(4)
		if len(names) == 0 || op < 2 {
			name = fmt.Sprintf("l%d-%05d.chaos.lan", n.i, seq)
			names = append(names, name)
			path = "/api/add-local-dns"
			body = fmt.Sprintf(`{"name":%q,"type":"A","ttl":30,"data":%q}`, name, value)
		} else {
			k := rng.Intn(len(names))
			name = names[k]
			idx, ok := n.localIndex(name)
			if !ok {
				continue // not there (never written, or the node does not answer)
			}
			if op == 2 {
				path = "/api/update-local-dns"
				body = fmt.Sprintf(`{"index":%d,"record":{"name":%q,"type":"A","ttl":30,"data":%q}}`, idx, name, value)
			} else {
				path = "/api/delete-local-dns"
				body = fmt.Sprintf(`{"index":%d}`, idx)
				value = ""
				names = append(names[:k], names[k+1:]...)
			}
		}
		rec.mu.Lock()
		lr := rec.local[n.i][name]
		if lr == nil {
			lr = &localRec{values: map[string]bool{}}
			rec.local[n.i][name] = lr
			rec.localNames[n.i] = append(rec.localNames[n.i], name)
		}
		if value != "" {
			lr.values[value] = true // before the write: a query may see it at once
		}
		rec.mu.Unlock()
		code, _, err := n.call("POST", path, body)
		rec.mu.Lock()
		rec.localOps++
		switch {
		case code == 200:
			lr.acked, lr.ackedAny, lr.uncertain = value, true, false
		case err != nil || (code >= 500 && code != 507):
			lr.uncertain = true
		}
		rec.mu.Unlock()
	}
}

// localIndex is the index of the local record named name on node n.
func (n *node) localIndex(name string) (int, bool) {
	recs, err := n.localRecords()
	if err != nil {
		return 0, false
	}
	for _, r := range recs {
		if r.Name == name {
			return r.Index, true
		}
	}
	return 0, false
}

type localDNSRecord struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Data  string `json:"data"`
}

func (n *node) localRecords() ([]localDNSRecord, error) {
	code, body, err := n.call("GET", "/api/local-dns", "")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("local-dns: %d", code)
	}
	var r struct {
		Records []localDNSRecord `json:"records"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, err
	}
	return r.Records, nil
}

// The tunnel workload: an echo service in node 0's namespace, a tunnel
// server for it on node 0, and on every other node a claim of
// t<node>.p2p with the server's URL and a tunnel client for it.
const (
	echoAddr   = "127.0.0.1:7791"
	tunnelPort = 7792
)

// setupTunnels makes the tunnel server on node 0 and the clients on the
// others, and returns each client's address (index = node).
func setupTunnels(ctx context.Context, nodes []*node, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	poll := func(what string, f func() (string, error)) (string, error) {
		for {
			v, err := f()
			if err == nil && v != "" {
				return v, nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("%s: not within %v: %v", what, within, err)
			}
			if !transport.Wait(ctx, 200*time.Millisecond) {
				return "", ctx.Err()
			}
		}
	}
	srv := nodes[0]
	code, body, err := srv.call("POST", "/api/tunnel-create", `{"name":"chaos-echo","port":7791,"host":"127.0.0.1","key":"chaos-echo-seed"}`)
	if err != nil || code != 200 {
		return nil, fmt.Errorf("tunnel-create on node 0: %d %s %v", code, body, err)
	}
	var created struct{ ID string }
	_ = json.Unmarshal([]byte(body), &created)
	url, err := poll("the tunnel server running", func() (string, error) {
		code, body, err := srv.call("GET", "/api/tunnel-servers", "")
		if err != nil || code != 200 {
			return "", fmt.Errorf("tunnel-servers: %d %v", code, err)
		}
		var list []struct {
			ID   string
			Info struct{ State, URL string }
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			return "", err
		}
		for _, s := range list {
			if s.ID == created.ID && s.Info.State == "running" {
				return s.Info.URL, nil
			}
		}
		return "", fmt.Errorf("server %s not running", created.ID)
	})
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(nodes))
	for _, n := range nodes[1:] {
		d := fmt.Sprintf("t%d.p2p", n.i)
		if code, body, err := n.call("POST", "/api/add-domain", `{"domain":"`+d+`","hash":"`+url+`"}`); err != nil || code != 200 {
			return nil, fmt.Errorf("add-domain %s on node %d: %d %s %v", d, n.i, code, body, err)
		}
	}
	for _, n := range nodes[1:] {
		d := fmt.Sprintf("t%d.p2p", n.i)
		// The client needs the node to own the domain: a 400 until the
		// claim resolved.
		id, err := poll("tunnel client for "+d, func() (string, error) {
			code, body, err := n.call("POST", "/api/tunnel-client-create", fmt.Sprintf(`{"domain":%q,"key":%q,"port":%d}`, d, url, tunnelPort))
			if err != nil || code != 200 {
				return "", fmt.Errorf("tunnel-client-create on node %d: %d %s %v", n.i, code, body, err)
			}
			var r struct{ ID string }
			err = json.Unmarshal([]byte(body), &r)
			return r.ID, err
		})
		if err != nil {
			return nil, err
		}
		addrs[n.i], err = poll("tunnel client "+id+" running", func() (string, error) { return n.tunnelClientAddr(id) })
		if err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// tunnelClientAddr is the address of the running client id on node n.
func (n *node) tunnelClientAddr(id string) (string, error) {
	code, body, err := n.call("GET", "/api/tunnel-clients", "")
	if err != nil || code != 200 {
		return "", fmt.Errorf("tunnel-clients: %d %v", code, err)
	}
	var list []struct {
		ID   string
		Info struct{ State, Address, Error string }
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return "", err
	}
	for _, c := range list {
		if c.ID == id {
			if c.Info.State != "running" {
				return "", fmt.Errorf("client %s %s %s", id, c.Info.State, c.Info.Error)
			}
			return c.Info.Address, nil
		}
	}
	return "", fmt.Errorf("no client %s", id)
}

// tunnelTraffic sends a few KiB through node n's tunnel client at addr
// every 200-400 ms and checks that the same bytes come back.
func tunnelTraffic(ctx context.Context, n *node, addr string, rec *record, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	for transport.Wait(ctx, time.Duration(200+rng.Intn(200))*time.Millisecond) {
		msg := make([]byte, 1+rng.Intn(32<<10))
		rng.Read(msg)
		got, err := roundTrip(ctx, n, addr, msg)
		rec.mu.Lock()
		switch {
		case err != nil:
			rec.tunFail++
		case !bytes.Equal(got, msg):
			bad(&rec.tunCorrupt, fmt.Sprintf("node %d: sent %d bytes through the tunnel, %d came back and differ", n.i, len(msg), len(got)))
		default:
			rec.tunOK++
			rec.tunBytes += len(msg)
			rec.tunLastOK[n.i] = time.Now()
		}
		rec.mu.Unlock()
	}
}

func roundTrip(ctx context.Context, n *node, addr string, msg []byte) ([]byte, error) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := dialIn(dctx, n.lab.nsPath(n.i), "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	got, rerr := io.ReadAll(c)
	werr := <-errc
	if !bytes.HasPrefix(msg, got) {
		// Bytes that are not what was sent are corruption, whatever
		// happened to the connection after them.
		return got, nil
	}
	switch {
	case werr != nil:
		return got, werr
	case rerr != nil:
		return got, rerr
	case len(got) != len(msg):
		// A connection that ended early (its peer vanished): a prefix of
		// what was sent, not corruption.
		return got, fmt.Errorf("%d of %d bytes came back", len(got), len(msg))
	}
	return got, nil
}

// wsSubscriber keeps a WebSocket subscriber on node n's /ws: it
// subscribes to the stats and counts what arrives, the update-database
// hints in particular; it connects again whenever the connection ends.
func wsSubscriber(ctx context.Context, n *node, rec *record) {
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, n.lab.nsPath(n.i), network, addr)
		},
		HandshakeTimeout: 5 * time.Second,
	}
	for ctx.Err() == nil {
		c, _, err := d.DialContext(ctx, "ws://"+adminAddr+"/ws", nil)
		if err != nil {
			transport.Wait(ctx, 250*time.Millisecond)
			continue
		}
		rec.mu.Lock()
		rec.wsConnects[n.i]++
		rec.mu.Unlock()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"subscribe-stats"}`))
		for {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, b, err := c.ReadMessage()
			if err != nil {
				break
			}
			var m struct {
				Type string `json:"type"`
			}
			rec.mu.Lock()
			rec.wsMsgs[n.i]++
			if json.Unmarshal(b, &m) != nil || m.Type == "" {
				bad(&rec.wsBad, fmt.Sprintf("node %d: a message without a type: %.80q", n.i, b))
			} else if m.Type == "update-database" {
				rec.wsLastHint[n.i] = time.Now()
			}
			rec.mu.Unlock()
		}
		stop()
		c.Close()
	}
}

// dnsQuerier asks node n's DNS, a few times a second, for names the
// workload claimed (on any node), local records it wrote on n, and names
// nobody claimed, and checks each answer against the record: a p2p name
// answers only an address n's /api/interfaces gave that domain at some
// moment, a local name only a value written to it, a name never claimed
// nothing.
func dnsQuerier(ctx context.Context, n *node, rec *record, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	cl := &dns.Client{Timeout: 2 * time.Second}
	for seq := 0; transport.Wait(ctx, time.Duration(100+rng.Intn(200))*time.Millisecond); seq++ {
		var name, kind string
		rec.mu.Lock()
		switch rng.Intn(3) {
		case 0:
			name, kind = pick(rng, rec.tried), "p2p"
		case 1:
			name, kind = pick(rng, rec.localNames[n.i]), "local"
		}
		rec.mu.Unlock()
		if name == "" {
			name, kind = fmt.Sprintf("never-%d-%d.p2p", n.i, seq), "never"
		}
		ips, err := n.queryA(ctx, cl, name)
		rec.mu.Lock()
		rec.dnsQueries++
		if err != nil {
			rec.dnsFailed++
			rec.mu.Unlock()
			continue
		}
		if len(ips) > 0 {
			rec.dnsAnswered++
		}
		rec.mu.Unlock()
		if wrong := judgeDNS(n, rec, name, kind, ips); len(wrong) > 0 {
			rec.mu.Lock()
			bad(&rec.dnsBad, fmt.Sprintf("node %d answered %s (%s) with %v, never its value there", n.i, name, kind, wrong))
			rec.mu.Unlock()
		}
	}
}

// judgeDNS returns the addresses of a DNS answer from node n for name
// that the record cannot explain: for a name nobody claimed ("never")
// any; for a local record one never written to it; for a p2p name one
// n's /api/interfaces never gave that domain (read again at once before
// saying so: the address may be newer than the last listing seen).
func judgeDNS(n *node, rec *record, name, kind string, ips []string) []string {
	var wrong []string
	rec.mu.Lock()
	for _, ip := range ips {
		switch kind {
		case "never":
			wrong = append(wrong, ip)
		case "local":
			if lr := rec.local[n.i][name]; lr == nil || !lr.values[ip] {
				wrong = append(wrong, ip)
			}
		case "p2p":
			if !rec.ifaces[n.i][name][ip] {
				wrong = append(wrong, ip)
			}
		}
	}
	rec.mu.Unlock()
	if kind != "p2p" || len(wrong) == 0 {
		return wrong
	}
	n.sampleInterfaces(rec)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var still []string
	for _, ip := range wrong {
		if !rec.ifaces[n.i][name][ip] {
			still = append(still, ip)
		}
	}
	return still
}

func pick(rng *rand.Rand, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[rng.Intn(len(names))]
}

// queryA asks node n's DNS for name's A records over UDP (TCP when
// truncated is not needed: the answers are small).
func (n *node) queryA(ctx context.Context, cl *dns.Client, name string) ([]string, error) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := dialIn(qctx, n.lab.nsPath(n.i), "udp", dnsAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := cl.ExchangeWithConnContext(qctx, m, &dns.Conn{Conn: c})
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, a := range r.Answer {
		if a, ok := a.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return ips, nil
}

// sampleInterfaces adds node n's domain → IP listing to the record.
func (n *node) sampleInterfaces(rec *record) {
	code, body, err := n.call("GET", "/api/interfaces", "")
	if err != nil || code != 200 {
		return
	}
	var list []struct{ Domain, IP string }
	if json.Unmarshal([]byte(body), &list) != nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range list {
		if _, err := netip.ParseAddr(m.IP); err != nil {
			continue
		}
		d := strings.TrimSuffix(m.Domain, ".")
		if rec.ifaces[n.i][d] == nil {
			rec.ifaces[n.i][d] = map[string]bool{}
		}
		rec.ifaces[n.i][d][m.IP] = true
	}
}

// interfaceSampler reads node n's /api/interfaces every second, so the
// record holds every address the node gave a domain.
func interfaceSampler(ctx context.Context, n *node, rec *record) {
	for transport.Wait(ctx, time.Second) {
		n.sampleInterfaces(rec)
	}
}
