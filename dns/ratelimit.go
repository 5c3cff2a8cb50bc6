package dns

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"
)

// Response-rate limiting (RRL) for UDP clients outside the recursion ACL,
// in the manner of BIND's rate-limit clause: a token bucket per client
// network (/24 for IPv4, /56 for IPv6, BIND's defaults), refilled at
// Config.RateLimit responses per second with a burst of one second's
// worth. A response over the budget is dropped, except every rrlSlip-th
// one, which "slips" out as an empty truncated reply (TC=1, header and
// question only, no larger than the query): a real client behind a
// limited network retries over TCP and gets its answer, while a spoofed
// victim receives no amplification. TCP is never limited (a completed
// handshake proves the source). Clients in the ACL are never limited.
//
// Why per network and not per (network, answer) as BIND does: the
// clients outside the ACL only ever get the node's own small data set or
// REFUSED, so the answer adds nothing to the key but memory.

// DefaultRateLimit is Config.RateLimit's default: UDP responses per second
// to one client network outside the recursion ACL.
const DefaultRateLimit = 20

// rrlSlip: one in rrlSlip limited responses is sent truncated (BIND's
// default slip 2).
const rrlSlip = 2

// rrlMaxBuckets bounds the limiter's memory under a flood of spoofed
// sources: past it, idle buckets are swept, and if that frees nothing the
// table starts over (each network then gets one more burst at most).
const rrlMaxBuckets = 1 << 16

type rrlVerdict uint8

const (
	rrlSend rrlVerdict = iota
	rrlSlipTC
	rrlDrop
)

type limiter struct {
	rate float64 // tokens per second, and the burst
	now  func() time.Time

	mu      sync.Mutex // guards buckets
	buckets map[netip.Prefix]bucket
}

type bucket struct {
	tokens  float64
	last    int64  // UnixNano of the last refill
	limited uint32 // responses over budget so far (for the slip)
}

func newLimiter(perSecond int, now func() time.Time) *limiter {
	return &limiter{rate: float64(perSecond), now: now, buckets: map[netip.Prefix]bucket{}}
}

// netblock is the client network a bucket stands for.
func netblock(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	bits := 56
	if ip.Is4() {
		bits = 24
	}
	p, _ := ip.Prefix(bits)
	return p
}

// take spends one response of ip's network.
func (l *limiter) take(ip netip.Addr) rrlVerdict {
	key := netblock(ip)
	now := l.now().UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= rrlMaxBuckets {
			l.sweep(now)
		}
		b = bucket{tokens: l.rate, last: now}
	} else if now > b.last {
		b.tokens = min(l.rate, b.tokens+float64(now-b.last)/float64(time.Second)*l.rate)
		b.last = now
	}
	v := rrlSend
	if b.tokens >= 1 {
		b.tokens--
	} else {
		b.limited++
		v = rrlDrop
		if b.limited%rrlSlip == 0 {
			v = rrlSlipTC
		}
	}
	l.buckets[key] = b
	return v
}

// sweep forgets buckets that have refilled (the same as never seen).
func (l *limiter) sweep(now int64) {
	full := int64(time.Second) // a bucket refills completely in one second
	for k, b := range l.buckets {
		if now-b.last >= full {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= rrlMaxBuckets {
		clear(l.buckets)
	}
}

// slip turns the response resp into its truncated form in place — TC set,
// header and question kept, every other section gone — and returns its
// length (0 when resp does not even hold its question).
func slip(resp []byte) int {
	if len(resp) < 12 {
		return 0
	}
	end := 12
	if binary.BigEndian.Uint16(resp[4:]) == 1 {
		// The question's name is the first in the message: never compressed.
		i := 12
		for {
			if i >= len(resp) {
				return 0
			}
			l := int(resp[i])
			if l == 0 {
				break
			}
			if l > 63 {
				return 0
			}
			i += 1 + l
		}
		end = i + 1 + 4
		if end > len(resp) {
			return 0
		}
	} else {
		binary.BigEndian.PutUint16(resp[4:], 0)
	}
	resp[2] |= 0x02 // TC
	binary.BigEndian.PutUint16(resp[6:], 0)
	binary.BigEndian.PutUint16(resp[8:], 0)
	binary.BigEndian.PutUint16(resp[10:], 0)
	return end
}
