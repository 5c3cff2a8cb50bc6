package dns

import (
	"encoding/hex"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"peerdns/dns/cookie"
	"peerdns/dns/zone"
)

// DNS cookies (RFC 7873, server cookies of RFC 9018: dns/cookie).
//
// Policy, on every transport:
//
//   - a malformed COOKIE option (not 8 or 16–40 bytes, or two of them):
//     FORMERR (§5.2.2);
//   - a client cookie alone, or with a server cookie that is not ours
//     (another server's, expired, for another address): answered as
//     usual with a fresh server cookie (§5.2.3, §5.2.4) — except over UDP
//     for a client outside the recursion ACL, which gets BADCOOKIE with
//     the fresh cookie and no data: such a client is one the rate limit
//     watches, and a cookie that does not verify is what a forger
//     replays; a real client retries at once with the cookie it got;
//   - a query without a question whose one record is an OPT with a
//     client cookie asks for a server cookie (§5.4): NOERROR with the
//     fresh cookie and nothing else (cookieOnly in handler.go);
//   - a valid server cookie: answered with a fresh one; over UDP it also
//     exempts a client outside the ACL from the response-rate limit, as
//     TCP does: only a client that receives our replies at its address
//     can send it back.
//
// The random secret made at start is replaced every Config.CookieRotate
// (a day by default), the previous one verifying until the next change;
// a secret given in Config.CookieSecret is left to whoever shares it.
//
// Queries without a cookie are answered without one. Cookies ride on the
// fast path: zone.Parse accepts an OPT holding one COOKIE option, the
// server makes the cookie (one SipHash, no allocation) and Write adds
// it.

// cookieState is what the COOKIE option of one query said.
type cookieState struct {
	present   bool // the query has a (well-formed) client cookie
	malformed bool // FORMERR
	proven    bool // its server cookie is ours and current
	bad       bool // it has a server cookie that is not
	out       [24]byte
}

// readCookie reads the COOKIE option of opt and makes the reply's
// cookie for client.
func (s *Server) readCookie(opt *dns.OPT, client netip.Addr) cookieState {
	var st cookieState
	var data []byte
	for _, o := range opt.Option {
		c, ok := o.(*dns.EDNS0_COOKIE)
		if !ok {
			continue
		}
		if st.present {
			st.malformed = true // two COOKIE options
			return st
		}
		b, err := hex.DecodeString(c.Cookie)
		if err != nil {
			st.malformed = true
			return st
		}
		data, st.present = b, true
	}
	if !st.present {
		return st
	}
	cl, server, err := cookie.Parse(data)
	if err != nil {
		st.malformed = true
		return st
	}
	now := s.cfg.Now()
	if server != nil {
		st.proven = s.cookies.Valid(server, &cl, client, now)
		st.bad = !st.proven
	}
	copy(st.out[:], cl[:])
	s.cookies.Make((*[cookie.ServerLen]byte)(st.out[cookie.ClientLen:]), &cl, client, now)
	return st
}

// addCookie puts the reply's cookie in resp's OPT record.
func addCookie(resp *dns.Msg, st *cookieState) {
	if st == nil || !st.present {
		return
	}
	if o := resp.IsEdns0(); o != nil {
		o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(st.out[:])})
	}
}

// fastCookie makes the reply's cookie for a fast-path query that has
// one, into q. It returns ok false when the slow path must answer (a
// server cookie that is not ours, from a UDP client outside the ACL:
// BADCOOKIE), and proven when the server cookie is ours.
func (s *Server) fastCookie(pkt []byte, q *zone.Query, client netip.Addr, sh *shard) (ok, proven bool) {
	cl := (*[cookie.ClientLen]byte)(pkt[q.CookieOff:])
	if !sh.nowOK {
		sh.now, sh.nowOK = s.cfg.Now(), true // once per batch of datagrams
	}
	now := sh.now
	if q.CookieLen > cookie.ClientLen {
		proven = s.cookies.Valid(pkt[q.CookieOff+cookie.ClientLen:q.CookieOff+q.CookieLen], cl, client, now)
		if !proven && s.checkClients && !s.acl.contains(client) {
			return false, false
		}
	}
	copy(q.OutCookie[:], cl[:])
	s.cookies.Make((*[cookie.ServerLen]byte)(q.OutCookie[cookie.ClientLen:]), cl, client, now)
	q.CookieOut = true
	return true, proven
}

// rotateCookies replaces the random cookie secret every interval, until
// Shutdown (RFC 7873 §7.1: a server secret changes periodically; the
// jar keeps the previous one valid, so no client sees BADCOOKIE for a
// cookie it got just before).
func (s *Server) rotateCookies(interval time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-tick.C:
			if err := s.cookies.Rotate(nil); err != nil {
				s.log.Warn("dns cookie secret not rotated", "err", err)
			}
		}
	}
}

// RotateCookieSecret makes key (16 bytes; nil: a random one) the secret
// of new server cookies; cookies made with the previous secret stay
// valid until the next rotation.
func (s *Server) RotateCookieSecret(key []byte) error { return s.cookies.Rotate(key) }
