// Package cookie implements DNS cookies for the node's DNS server: the
// COOKIE option of RFC 7873 and the interoperable server cookie of RFC
// 9018 (version 1: reserved, timestamp, SipHash-2-4 of the client cookie,
// those fields and the client's address).
//
// A client that sends a client cookie gets a server cookie in every
// answer; sending it back proves the client receives replies at its
// source address, which the server uses to exempt it from response-rate
// limiting over UDP (a spoofed source cannot learn the cookie). The
// hash is github.com/dchest/siphash (SipHash-2-4 with the reference
// implementation's key layout, which RFC 9018 names), not written here.
//
// Secrets: each Jar starts with a random 128-bit secret, or the one
// given (servers of one anycast set share it, RFC 9018 §2). Rotate
// installs a new one and keeps the previous one valid until the next
// rotation, so cookies issued just before a rotation still verify.
//
// Nothing here allocates: Parse reads the option in place, Make and
// Valid hash from stack buffers.
package cookie

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dchest/siphash"
)

// Sizes of the COOKIE option's parts (RFC 7873 §4).
const (
	ClientLen    = 8  // a client cookie
	MinServerLen = 8  // the shortest server cookie
	MaxServerLen = 32 // the longest
	ServerLen    = 16 // ours: version 1 of RFC 9018
	SecretLen    = 16 // SipHash key
)

// Version is the server cookie version of RFC 9018.
const Version = 1

// Timestamps RFC 9018 §4.3 accepts: at most an hour old and five
// minutes ahead of our clock.
const (
	MaxAge    = time.Hour
	MaxFuture = 5 * time.Minute
)

// ErrMalformed is a COOKIE option whose length is not 8 or 16–40 bytes
// (RFC 7873 §5.2.2: FORMERR).
var ErrMalformed = errors.New("malformed DNS cookie")

// Parse splits the data of a COOKIE option into the client cookie and
// the server cookie (nil when the option only holds a client cookie).
// server aliases opt.
func Parse(opt []byte) (client [ClientLen]byte, server []byte, err error) {
	n := len(opt)
	if n != ClientLen && (n < ClientLen+MinServerLen || n > ClientLen+MaxServerLen) {
		return client, nil, ErrMalformed
	}
	copy(client[:], opt)
	if n > ClientLen {
		server = opt[ClientLen:]
	}
	return client, server, nil
}

type secret struct{ k0, k1 uint64 }

// secrets are the current secret and the previous one (nil before the
// first rotation), installed together: a reader never sees a new
// current secret beside a previous one that is not the old current.
type secrets struct{ cur, prev *secret }

// Jar makes and checks server cookies. Safe for concurrent use.
type Jar struct {
	keys atomic.Pointer[secrets]
	mu   sync.Mutex // serialises Rotate
}

// New makes a Jar with key as its secret (SecretLen bytes), or a random
// one when key is nil.
func New(key []byte) (*Jar, error) {
	j := &Jar{}
	if err := j.Rotate(key); err != nil {
		return nil, err
	}
	return j, nil
}

// Rotate makes key (or a random secret when key is nil) the one new
// cookies are made with; the previous secret still verifies until the
// next rotation.
func (j *Jar) Rotate(key []byte) error {
	var b [SecretLen]byte
	switch {
	case key == nil:
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
	case len(key) != SecretLen:
		return errors.New("dns cookie secret must be 16 bytes")
	default:
		copy(b[:], key)
	}
	next := &secrets{cur: &secret{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}}
	j.mu.Lock()
	defer j.mu.Unlock()
	if old := j.keys.Load(); old != nil {
		next.prev = old.cur
	}
	j.keys.Store(next)
	return nil
}

// Make writes into dst the server cookie for client's cookie and
// address at now.
func (j *Jar) Make(dst *[ServerLen]byte, client *[ClientLen]byte, ip netip.Addr, now time.Time) {
	dst[0] = Version
	dst[1], dst[2], dst[3] = 0, 0, 0
	binary.BigEndian.PutUint32(dst[4:], uint32(now.Unix())) // serial number arithmetic, RFC 1982
	binary.LittleEndian.PutUint64(dst[8:], hash(j.keys.Load().cur, client, dst[:8], ip))
}

// Valid reports whether server is a cookie this Jar made (with the
// current or the previous secret) for client and ip, and its timestamp
// is within MaxAge before and MaxFuture after now.
func (j *Jar) Valid(server []byte, client *[ClientLen]byte, ip netip.Addr, now time.Time) bool {
	if len(server) != ServerLen || server[0] != Version || server[1]|server[2]|server[3] != 0 {
		return false
	}
	// The timestamp is compared in serial number arithmetic (RFC 1982),
	// as RFC 9018 §4.3 asks, so 2106 is no cliff.
	d := int32(binary.BigEndian.Uint32(server[4:]) - uint32(now.Unix()))
	if d > int32(MaxFuture/time.Second) || d < -int32(MaxAge/time.Second) {
		return false
	}
	got := binary.LittleEndian.Uint64(server[8:])
	keys := j.keys.Load()
	if hash(keys.cur, client, server[:8], ip) == got {
		return true
	}
	if keys.prev != nil && hash(keys.prev, client, server[:8], ip) == got {
		return true
	}
	return false
}

// hash is SipHash-2-4 over client cookie | version | reserved |
// timestamp | client IP (4 bytes for IPv4, 16 for IPv6), RFC 9018 §4.4.
func hash(s *secret, client *[ClientLen]byte, head []byte, ip netip.Addr) uint64 {
	var buf [ClientLen + 8 + 16]byte
	copy(buf[:], client[:])
	copy(buf[ClientLen:], head)
	n := ClientLen + 8
	ip = ip.Unmap()
	if ip.Is4() {
		a := ip.As4()
		n += copy(buf[n:], a[:])
	} else {
		a := ip.As16()
		n += copy(buf[n:], a[:])
	}
	return siphash.Hash(s.k0, s.k1, buf[:n])
}
