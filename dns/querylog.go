package dns

import (
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// The query log and per-client counters (Pi-hole's and dnsmasq's
// log-queries), off by default: SetQueryLog turns them on and off live.
//
// Off, they cost the answer paths one atomic load per batch of datagrams
// (per query on TCP, DoH and the slow path). On, each answered query is
// one non-blocking send of a small value (client, path, and — only while
// the second's log budget lasts — a copy of the reply) to a channel read
// by one goroutine of the server's, which counts queries per client and
// writes at most QueryLogRate lines a second to the server's logger (the
// `dns` channel), then one line saying how many it left out. A full
// channel drops the entry (counted in Dropped): the answer path never
// waits for the log.

// QueryLogRate is how many query lines a second the log writes at most.
const QueryLogRate = 50

// maxClients bounds the per-client table; later clients are counted
// under Other.
const maxClients = 4096

type qentry struct {
	client netip.Addr
	path   string
	resp   []byte   // a copy of the reply, when it is to be logged
	msg    *dns.Msg // or the reply as a message (TCP)
}

type queryLog struct {
	on      atomic.Bool
	tokens  atomic.Int64 // lines that may still be built this second
	dropped atomic.Int64 // entries the full channel refused
	ch      chan qentry

	mu      sync.Mutex // guards the fields below (the consumer and Clients)
	clients map[netip.Addr]int64
	other   int64 // queries of clients beyond maxClients
}

func newQueryLog() *queryLog {
	return &queryLog{ch: make(chan qentry, 4096), clients: map[netip.Addr]int64{}}
}

// SetQueryLog turns the query log and per-client counters on or off.
// Turning it on starts the counts afresh.
func (s *Server) SetQueryLog(on bool) {
	if on && !s.qlog.on.Load() {
		s.qlog.mu.Lock()
		s.qlog.clients = map[netip.Addr]int64{}
		s.qlog.other = 0
		s.qlog.mu.Unlock()
		s.qlog.tokens.Store(QueryLogRate)
	}
	s.qlog.on.Store(on)
	s.log.Info("dns query log", "enabled", on)
}

// QueryLogEnabled reports whether the query log is on.
func (s *Server) QueryLogEnabled() bool { return s.qlog.on.Load() }

// ClientCount is one client's answered queries since the log was turned on.
type ClientCount struct {
	Client  string `json:"client"`
	Queries int64  `json:"queries"`
}

// QueryClients is the per-client table: the clients with most queries
// first (at most limit; <= 0: all), the queries of clients beyond the
// table's bound, and the entries dropped because the log could not keep
// up.
func (s *Server) QueryClients(limit int) (clients []ClientCount, other, dropped int64) {
	s.qlog.mu.Lock()
	for a, n := range s.qlog.clients {
		clients = append(clients, ClientCount{Client: a.String(), Queries: n})
	}
	other = s.qlog.other
	s.qlog.mu.Unlock()
	sort.Slice(clients, func(i, j int) bool {
		if clients[i].Queries != clients[j].Queries {
			return clients[i].Queries > clients[j].Queries
		}
		return clients[i].Client < clients[j].Client
	})
	if limit > 0 && len(clients) > limit {
		clients = clients[:limit]
	}
	return clients, other, s.qlog.dropped.Load()
}

// note hands one answered query to the log; call only when the log is on.
// resp is the reply in wire format (copied only when it will be logged).
func (s *Server) note(client netip.Addr, resp []byte, path string) {
	e := qentry{client: client.Unmap(), path: path}
	if s.qlog.tokens.Add(-1) >= 0 {
		e.resp = append([]byte(nil), resp...)
	}
	s.send(e)
}

// noteMsg is note for a reply held as a message (TCP, DoT).
func (s *Server) noteMsg(client netip.Addr, m *dns.Msg, path string) {
	e := qentry{client: client.Unmap(), path: path}
	if s.qlog.tokens.Add(-1) >= 0 {
		e.msg = m
	}
	s.send(e)
}

func (s *Server) send(e qentry) {
	select {
	case s.qlog.ch <- e:
	default:
		s.qlog.dropped.Add(1)
	}
}

// runQueryLog is the consumer: counts, logs, and refills the budget
// every second until Shutdown.
func (s *Server) runQueryLog() {
	defer s.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-tick.C:
			if !s.qlog.on.Load() {
				continue
			}
			if left := s.qlog.tokens.Swap(QueryLogRate); left < 0 {
				s.log.Info("query log: lines left out (rate limit)", "count", -left, "perSecond", QueryLogRate)
			}
		case e := <-s.qlog.ch:
			s.qlog.mu.Lock()
			if _, ok := s.qlog.clients[e.client]; ok || len(s.qlog.clients) < maxClients {
				s.qlog.clients[e.client]++
			} else {
				s.qlog.other++
			}
			s.qlog.mu.Unlock()
			m := e.msg
			if m == nil && e.resp != nil {
				if m = new(dns.Msg); m.Unpack(e.resp) != nil {
					m = nil
				}
			}
			if m != nil && len(m.Question) > 0 {
				q := m.Question[0]
				s.log.Info("query", "name", q.Name, "type", dns.TypeToString[q.Qtype], "rcode", dns.RcodeToString[m.Rcode],
					"answers", len(m.Answer), "client", e.client.String(), "path", e.path)
			}
		}
	}
}
