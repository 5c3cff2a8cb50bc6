package applied

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"
)

// Checked remembers ops whose signatures a session verified, so the same
// op arriving from another neighbour before the ledger applied it (the
// vector does not have it yet) costs a hash and a lookup, not a second
// ed25519 check. In a burst an op reaches a node over several links
// within milliseconds, before the ledger has taken the first copy.
//
// An entry is the SHA-256 of the op's signing bytes and signature,
// under its writer and seq. A check is skipped only for an op whose
// signed content and signature hash alike to one that verified under
// the same writer, and ed25519 verification is a function of (key,
// message, signature): so a hit says exactly what a check would say.
// An op with the same writer and seq but other content or signature
// misses and is checked.
//
// Memory is bounded: entries live in two generations of at most
// CheckedGeneration each; when the current one fills, the older one is
// dropped. A dropped entry costs a check, never a wrong answer. By the
// time an entry ages out its op is long applied (the vector answers).
//
// Safe for concurrent use; a nil *Checked remembers nothing.
type Checked struct {
	mu       sync.Mutex
	cur, old map[checkedKey]checkedEntry
}

// checkedEntry is an op's content sum and when its check was recorded.
type checkedEntry struct {
	sum [sha256.Size]byte
	at  time.Time
}

// CheckedGeneration bounds each of the two generations: an entry (key,
// sum, time and map overhead) is ~125 B, so a node keeps at most ~500 KB. An op
// needs its entry only between its first copy and its application (the
// vector answers after that): a burst's few hundred ops in flight fit
// with room; a miss costs one check.
const CheckedGeneration = 2048

type checkedKey struct {
	writer string
	seq    uint64
}

// Sum is what Checked keys content by: SHA-256 of the signing bytes'
// length, the signing bytes and the signature (the length keeps one
// split of the same bytes from hashing like another).
func Sum(msg, sig []byte) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(msg)))
	h.Write(n[:])
	h.Write(msg)
	h.Write(sig)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Has reports whether an op of writer at seq with content sum verified.
func (c *Checked) Has(writer string, seq uint64, sum [sha256.Size]byte) bool {
	e, ok := c.lookup(writer, seq)
	return ok && e.sum == sum
}

// Seen reports whether an op of writer at seq verified here lately,
// whatever its content: it is on its way to the ledger (or there), so
// an announcement of it needs no graft.
func (c *Checked) Seen(writer string, seq uint64) bool {
	_, ok := c.lookup(writer, seq)
	return ok
}

// SeenSince reports whether an op of writer at seq verified here at or
// after since (and was not forgotten since).
func (c *Checked) SeenSince(writer string, seq uint64, since time.Time) bool {
	e, ok := c.lookup(writer, seq)
	return ok && !e.at.Before(since)
}

// lookup is the entry recorded for writer at seq, newest generation
// first.
func (c *Checked) lookup(writer string, seq uint64) (checkedEntry, bool) {
	if c == nil {
		return checkedEntry{}, false
	}
	k := checkedKey{writer, seq}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[k]; ok {
		return e, true
	}
	e, ok := c.old[k]
	return e, ok
}

// Add records that the op of writer at seq with content sum verified at
// now.
func (c *Checked) Add(writer string, seq uint64, sum [sha256.Size]byte, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || len(c.cur) >= CheckedGeneration {
		c.old, c.cur = c.cur, make(map[checkedKey]checkedEntry, CheckedGeneration/4)
	}
	c.cur[checkedKey{writer, seq}] = checkedEntry{sum, now}
}

// ForgetAbove drops what is recorded of ops the vector has not applied:
// the ledger restarted, and what it was handed and had not committed is
// gone.
func (c *Checked) ForgetAbove(v *Vector) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, gen := range []map[checkedKey]checkedEntry{c.cur, c.old} {
		for k := range gen {
			if !v.Has(k.writer, k.seq) {
				delete(gen, k)
			}
		}
	}
}

// Forget drops what is recorded of writer's op at seq: it verified, but
// the ledger did not apply it (it was refused, or came after a gap), so
// it is not on its way there any more.
func (c *Checked) Forget(writer string, seq uint64) {
	if c == nil {
		return
	}
	k := checkedKey{writer, seq}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cur, k)
	delete(c.old, k)
}
