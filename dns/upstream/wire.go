package upstream

import (
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Template is a cached upstream answer packed in wire format, so the
// server's fast path can answer a cache hit without miekg/dns: it copies
// Msg, puts in the client's ID, flags and question (same name, so same
// length and the compression pointers still hold) and counts every TTL
// down by the entry's age. Immutable once stored.
type Template struct {
	Msg     []byte   // the response with ID 0 and the question lowercased, no OPT
	QEnd    int      // offset just past the question
	TTLOffs []int    // offset of every record's TTL field
	TTLs    []uint32 // their TTLs when stored
	Stored  time.Time
	Expires time.Time
}

// WireKey is the template key of a question of class IN: the name in
// lowercased wire format followed by the type.
func WireKey(name string, qtype uint16) (string, bool) {
	var buf [258]byte
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(name)), buf[:], 0, nil, false)
	if err != nil {
		return "", false
	}
	binary.BigEndian.PutUint16(buf[n:], qtype)
	return string(buf[:n+2]), true
}

// Template returns the cached answer for key (see WireKey) if it has not
// expired. It does not allocate.
func (r *Resolver) Template(key []byte, now time.Time) (*Template, bool) {
	r.wmu.RLock()
	t := r.wire[string(key)]
	r.wmu.RUnlock()
	if t == nil || !now.Before(t.Expires) {
		return nil, false
	}
	r.hits.Add(1)
	return t, true
}

// Now is the resolver's clock.
func (r *Resolver) Now() time.Time { return r.cfg.Now() }

func buildTemplate(k key, m *dns.Msg, stored, expires time.Time) (*Template, error) {
	c := m.Copy()
	c.Id = 0
	c.Question = []dns.Question{{Name: k.name, Qtype: k.qtype, Qclass: dns.ClassINET}}
	c.Response, c.Authoritative, c.Truncated = true, false, false
	c.RecursionDesired, c.RecursionAvailable = true, true
	c.AuthenticatedData, c.CheckingDisabled, c.Zero = false, false, false
	c.Compress = true
	b, err := c.Pack()
	if err != nil {
		return nil, err
	}
	t := &Template{Msg: b, Stored: stored, Expires: expires}
	if err := t.index(); err != nil {
		return nil, err
	}
	return t, nil
}

var errWalk = errors.New("template does not walk")

// index finds the question's end and every record's TTL field.
func (t *Template) index() error {
	b := t.Msg
	if len(b) < 12 || binary.BigEndian.Uint16(b[4:]) != 1 {
		return errWalk
	}
	off, err := skipName(b, 12)
	if err != nil || off+4 > len(b) {
		return errWalk
	}
	t.QEnd = off + 4
	off = t.QEnd
	n := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) + int(binary.BigEndian.Uint16(b[10:]))
	for i := 0; i < n; i++ {
		if off, err = skipName(b, off); err != nil || off+10 > len(b) {
			return errWalk
		}
		t.TTLOffs = append(t.TTLOffs, off+4)
		t.TTLs = append(t.TTLs, binary.BigEndian.Uint32(b[off+4:]))
		off += 10 + int(binary.BigEndian.Uint16(b[off+8:]))
		if off > len(b) {
			return errWalk
		}
	}
	if off != len(b) {
		return errWalk
	}
	return nil
}

// skipName steps over a (possibly compressed) name at off.
func skipName(b []byte, off int) (int, error) {
	for {
		if off >= len(b) {
			return 0, errWalk
		}
		l := int(b[off])
		switch {
		case l == 0:
			return off + 1, nil
		case l&0xC0 == 0xC0:
			return off + 2, nil
		case l > 63:
			return 0, errWalk
		}
		off += 1 + l
	}
}

// template builds e's wire answer for the server's fast path (class IN
// only; none when it does not pack).
func (r *Resolver) template(k key, e *entry) {
	if k.qclass != dns.ClassINET || e.msg == nil {
		return
	}
	wk, ok := WireKey(k.name, k.qtype)
	if !ok {
		return
	}
	t, err := buildTemplate(k, e.msg, e.stored, e.expires)
	if err != nil {
		return // the slow path still answers from e
	}
	e.wkey, e.tpl = wk, t
}

// putTemplate makes e's template the fast answer of its key; the LRU's
// eviction of e removes it again.
func (r *Resolver) putTemplate(e *entry) {
	if e.tpl == nil {
		return
	}
	r.wmu.Lock()
	if len(r.wire) >= 2*r.CacheSize() {
		clear(r.wire) // a safety valve; the LRU bounds it in practice
	}
	r.wire[e.wkey] = e.tpl
	r.wmu.Unlock()
}

// evicted drops e's template unless a newer one replaced it.
func (r *Resolver) evicted(_ key, e *entry) {
	if e.tpl == nil {
		return
	}
	r.wmu.Lock()
	if r.wire[e.wkey] == e.tpl {
		delete(r.wire, e.wkey)
	}
	r.wmu.Unlock()
}
