// Package applied shares the ledger's applied version vector (the highest
// sequence applied per writer) with the peer sessions, so a session tells
// a duplicate op from a new one before it pays for the signature check.
//
// Replication delivers many duplicates: a relayed op reaches a node once
// per path, and on a sparse 200-node graph 62% of all CPU went to
// verifying ops the ledger then dropped as duplicates (docs/scale.md).
// The ledger owns the vector and only advances it, after applying an op;
// sessions only read it. Skipping is never a way in: an op a session did
// not check goes to the ledger unmarked, and the ledger checks the
// signature of every unmarked op it does not already hold. So a value
// older than the ledger's costs a check the session could have skipped,
// and one newer (a vector kept across a restore) moves the check into the
// ledger; neither lets an unsigned op through.
//
// It must never be written by anything but the ledger actor.
package applied

import (
	"sync"
	"sync/atomic"
)

// Vector is safe for concurrent use; the zero value is empty, and a nil
// *Vector is an empty vector that ignores Advance.
type Vector struct {
	m sync.Map // writer id → *atomic.Uint64
}

// Advance records that the ledger applied every op of writer up to seq
// (it never lowers a value).
func (v *Vector) Advance(writer string, seq uint64) {
	if v == nil {
		return
	}
	p, ok := v.m.Load(writer)
	if !ok {
		p, _ = v.m.LoadOrStore(writer, new(atomic.Uint64))
	}
	c := p.(*atomic.Uint64)
	for {
		old := c.Load()
		if seq <= old || c.CompareAndSwap(old, seq) {
			return
		}
	}
}

// Seq is the highest seq of writer the ledger has applied (0: none).
func (v *Vector) Seq(writer string) uint64 {
	if v == nil {
		return 0
	}
	p, ok := v.m.Load(writer)
	if !ok {
		return 0
	}
	return p.(*atomic.Uint64).Load()
}

// Has reports whether the ledger has applied writer's op seq.
func (v *Vector) Has(writer string, seq uint64) bool {
	if v == nil {
		return false
	}
	p, ok := v.m.Load(writer)
	return ok && seq <= p.(*atomic.Uint64).Load()
}
