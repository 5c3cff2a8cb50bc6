package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"peerdns/dns/zone"
)

// readLoop is one UDP socket's reader, one datagram per system call
// (serveUDP uses batched I/O where it can): fast path inline, slow path
// in a goroutine.
func (s *Server) readLoop(c *net.UDPConn, sh *shard) {
	defer s.wg.Done()
	defer s.alive.Add(-1)
	buf := make([]byte, dns.MaxMsgSize)
	out := make([]byte, s.cfg.UDPSize)
	size := int(s.cfg.UDPSize)
	var q zone.Query
	var ctl, octl [ctlSize]byte
	for {
		var n, cn int
		var from netip.AddrPort
		var err error
		if s.pktinfo {
			n, cn, _, from, err = c.ReadMsgUDPAddrPort(buf, ctl[:])
		} else {
			n, from, err = c.ReadFromUDPAddrPort(buf)
		}
		if err != nil {
			if s.stopped.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.logError("dns udp read", err)
			continue
		}
		sh.queries.Add(1)
		sh.batches.Add(1)
		sh.nowOK = false
		if t := s.fresh(s.table.Load()); t != nil {
			m := s.fast(t, buf[:n], &q, out, size, from.Addr(), sh)
			if m > 0 {
				// The query log's switch as the query is answered (read
				// before the reply leaves, like the batched reader does).
				qlog := s.qlog.on.Load()
				var err error
				if oc := replyControl(ctl[:cn], octl[:]); oc > 0 {
					_, _, err = c.WriteMsgUDPAddrPort(out[:m], octl[:oc], from)
				} else {
					_, err = c.WriteToUDPAddrPort(out[:m], from)
				}
				if err != nil {
					s.logError("dns udp write", err)
				}
				sh.fast.Add(1)
				if s.debugEnabled() {
					s.debugQuery(out[:m], from, "fast")
				}
				if qlog {
					s.note(from.Addr(), out[:m], "fast")
				}
				continue
			}
			if m < 0 {
				continue // rate-limited: no reply
			}
		}
		s.slowUDP(c, buf[:n], from, ctl[:cn], sh)
	}
}

// fast answers a plain UDP query from client without miekg/dns: from the
// table's pre-packed answers, or, for a name the node's data does not
// cover and a client that gets recursion, from the upstream cache's wire
// template. 0 means the slow path; -1 that the answer was rate-limited
// away (counted; nothing to send).
//
// A client outside the recursion ACL costs one ACL match per answer here
// (none at all when checkClients is false, e.g. on the default loopback
// address): its answers lose RA and go through the rate limiter, because
// the node's own records (a 4000-byte TXT) amplify as well as anyone's.
func (s *Server) fast(t *zone.Table, pkt []byte, q *zone.Query, out []byte, size int, client netip.Addr, sh *shard) int {
	if t == nil || !zone.Parse(pkt, size, q) {
		return 0
	}
	proven := false
	if q.CookieLen > 0 {
		var ok bool
		if ok, proven = s.fastCookie(pkt, q, client, sh); !ok {
			return 0 // BADCOOKIE: the slow path
		}
	}
	m := t.Answer(pkt, q, out, s.cfg.UDPSize)
	if m == 0 {
		if !q.Miss {
			return 0
		}
		// Not our name: only recursion answers it, and the upstream cache
		// is recursion's too (as BIND's allow-query-cache defaults to
		// allow-recursion). Others go to the slow path, which refuses.
		if s.checkClients && !s.acl.contains(client) {
			return 0
		}
		m = s.cached(pkt, q, out)
		if m > 0 {
			sh.answers.add(SourceCache, int(out[3]&0xF))
		}
		return m
	}
	sh.answers.add(kindSource(q.Kind), int(out[3]&0xF))
	if s.checkClients && !s.acl.contains(client) {
		if m = s.screen(out[:m], client, sh, proven); m == 0 {
			return -1
		}
	}
	return m
}

// screen applies to resp (in place) what a UDP client outside the
// recursion ACL gets: RA cleared, then the response-rate limit. It
// returns the length to send, 0 for nothing. A client that proved its
// address with a valid server cookie (proven) is not rate-limited, as
// over TCP (cookies.go).
func (s *Server) screen(resp []byte, client netip.Addr, sh *shard, proven bool) int {
	if len(resp) < 12 {
		return 0
	}
	resp[3] &^= 0x80 // RA: no recursion for this client (RFC 1035 §4.1.1)
	if s.rrl == nil || proven {
		return len(resp)
	}
	switch s.rrl.take(client) {
	case rrlSend:
		return len(resp)
	case rrlSlipTC:
		sh.slipped.Add(1)
		return slip(resp)
	}
	sh.rateLimited.Add(1)
	return 0
}

// recursionFor reports whether client gets recursion.
func (s *Server) recursionFor(client netip.Addr) bool {
	return !s.checkClients || s.acl.contains(client)
}

// cached writes the upstream cache's answer to q with TTLs counted down.
func (s *Server) cached(req []byte, q *zone.Query, out []byte) int {
	var key [258]byte
	n := copy(key[:], q.Key[:q.KeyLen])
	binary.BigEndian.PutUint16(key[n:], q.Qtype)
	now := s.up.Now()
	tpl, ok := s.up.Template(key[:n+2], now)
	if !ok || tpl.QEnd != q.QEnd {
		return 0
	}
	b := tpl.Msg
	m := zone.Write(req, q, out, binary.BigEndian.Uint16(b[2:])&0x000F,
		binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:]), b[tpl.QEnd:], s.cfg.UDPSize)
	if m == 0 {
		return 0
	}
	age := uint32(now.Sub(tpl.Stored) / time.Second)
	for i, off := range tpl.TTLOffs {
		ttl := tpl.TTLs[i]
		if ttl > age {
			ttl -= age
		} else {
			ttl = 0
		}
		binary.BigEndian.PutUint32(out[off:], ttl)
	}
	return m
}

// writeUDP sends resp to client, from the address the query came to when
// ctl (the query's control messages) names it.
func writeUDP(c *net.UDPConn, resp []byte, to netip.AddrPort, ctl []byte) error {
	if len(ctl) > 0 {
		var oob [ctlSize]byte
		if n := replyControl(ctl, oob[:]); n > 0 {
			_, _, err := c.WriteMsgUDPAddrPort(resp, oob[:n], to)
			return err
		}
	}
	_, err := c.WriteToUDPAddrPort(resp, to)
	return err
}

// slowUDP answers one datagram through miekg/dns in its own goroutine, so
// a slow upstream never stalls the socket. pkt and ctl (the datagram's
// control messages, for the reply's source address) are copied.
func (s *Server) slowUDP(c *net.UDPConn, pkt []byte, from netip.AddrPort, ctl []byte, sh *shard) {
	if len(pkt) < 12 || pkt[2]&0x80 != 0 {
		// A runt or a response (QR=1), never answered (exchange drops
		// them too): dropped here, without a goroutine or a copy (a
		// flood of responses is the backscatter of queries sent to
		// others in our address's name).
		sh.dropped.Add(1)
		return
	}
	sh.slow.Add(1)
	select {
	case s.slow <- struct{}{}:
	default:
		sh.dropped.Add(1) // overloaded: drop, the client retries
		return
	}
	req := append([]byte(nil), pkt...)
	if len(ctl) > 0 {
		ctl = append([]byte(nil), ctl...)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slow }()
		recurse := s.recursionFor(from.Addr())
		resp, proven := s.handleRaw(s.baseCtx, req, recurse, from.Addr().Unmap())
		if resp == nil {
			return
		}
		if !recurse {
			n := s.screen(resp, from.Addr(), &s.slowCnt, proven)
			if n == 0 {
				return
			}
			resp = resp[:n]
		}
		qlog := s.qlog.on.Load()
		if err := writeUDP(c, resp, from, ctl); err != nil && !s.stopped.Load() {
			s.logError("dns udp write", err)
		}
		if s.debugEnabled() {
			s.debugQuery(resp, from, "slow")
		}
		if qlog {
			s.note(from.Addr(), resp, "slow")
		}
	}()
}

func (s *Server) debugEnabled() bool { return s.log.Enabled(context.Background(), slog.LevelDebug) }

func (s *Server) debugQuery(resp []byte, from netip.AddrPort, path string) {
	var m dns.Msg
	if m.Unpack(resp) != nil || len(m.Question) == 0 {
		return
	}
	q := m.Question[0]
	s.log.Debug("query", "name", q.Name, "type", dns.TypeToString[q.Qtype], "rcode", dns.RcodeToString[m.Rcode], "answers", len(m.Answer), "from", from.String(), "path", path)
}

// logError logs at most one error line per second (a flood of bad
// packets must not flood the log).
func (s *Server) logError(msg string, err error) {
	now := time.Now().Unix()
	last := s.lastLog.Load()
	if now == last || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Error(msg, "err", err)
}
