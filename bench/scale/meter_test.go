package scale

import (
	"sync/atomic"
)

// meter counts control-stream bytes and frames per sending and per
// receiving node and per message kind, fed by transport.MemNetwork's
// meter hook. index is filled before the network starts and read-only
// afterwards; the counters are atomics.
type meter struct {
	index map[string]int
	kinds map[string]*kindCount // fixed set of kinds, built in newMeter
	// links, when set, is the topology: frames between nodes it does not
	// link are counted in offLink (the simulation's own check).
	links   *topology
	offLink atomic.Int64
}

type kindCount struct {
	frames   atomic.Int64
	bytes    atomic.Int64
	sent     []atomic.Int64 // bytes per sending node
	received []atomic.Int64 // bytes per receiving node
}

// meteredKinds are the envelope kinds counted apart; the rest go to "other".
var meteredKinds = []string{"hello", "accept", "refuse", "vv", "want", "ops", "peers", "ping", "pong", "tunnels",
	"heartbeats", "suspicions", "liveness", "shuffle", "shuffle-reply", "leave", "digest", "ihave", "graft", "prune", "other"}

func newMeter() *meter {
	m := &meter{index: map[string]int{}, kinds: map[string]*kindCount{}}
	for _, k := range meteredKinds {
		m.kinds[k] = &kindCount{}
	}
	return m
}

// resize sets the number of nodes; call before any frame is sent.
func (m *meter) resize(n int) {
	for _, k := range m.kinds {
		k.sent = make([]atomic.Int64, n)
		k.received = make([]atomic.Int64, n)
	}
}

func (m *meter) record(from, to, kind string, bytes int) {
	k := m.kinds[kind]
	if k == nil {
		k = m.kinds["other"]
	}
	k.frames.Add(1)
	k.bytes.Add(int64(bytes))
	i, okFrom := m.index[from]
	j, okTo := m.index[to]
	if okFrom {
		k.sent[i].Add(int64(bytes))
	}
	if okTo {
		k.received[j].Add(int64(bytes))
	}
	if m.links != nil && (!okFrom || !okTo || !m.links.linked(i, j)) {
		m.offLink.Add(1)
	}
}

// snapshot is a copy of the counters at one moment.
type snapshot struct {
	bytes, frames map[string]int64
	sent, recv    map[string][]int64
}

func (m *meter) snapshot() snapshot {
	s := snapshot{bytes: map[string]int64{}, frames: map[string]int64{}, sent: map[string][]int64{}, recv: map[string][]int64{}}
	for name, k := range m.kinds {
		s.bytes[name] = k.bytes.Load()
		s.frames[name] = k.frames.Load()
		s.sent[name] = make([]int64, len(k.sent))
		s.recv[name] = make([]int64, len(k.received))
		for i := range k.sent {
			s.sent[name][i] = k.sent[i].Load()
			s.recv[name][i] = k.received[i].Load()
		}
	}
	return s
}

// since is what was counted between earlier and s.
func (s snapshot) since(earlier snapshot) snapshot {
	d := snapshot{bytes: map[string]int64{}, frames: map[string]int64{}, sent: map[string][]int64{}, recv: map[string][]int64{}}
	for k := range s.bytes {
		d.bytes[k] = s.bytes[k] - earlier.bytes[k]
		d.frames[k] = s.frames[k] - earlier.frames[k]
		d.sent[k] = make([]int64, len(s.sent[k]))
		d.recv[k] = make([]int64, len(s.recv[k]))
		for i := range s.sent[k] {
			d.sent[k][i] = s.sent[k][i] - earlier.sent[k][i]
			d.recv[k][i] = s.recv[k][i] - earlier.recv[k][i]
		}
	}
	return d
}

// total is the bytes of every kind.
func (s snapshot) total() int64 {
	var t int64
	for _, b := range s.bytes {
		t += b
	}
	return t
}

// maxSent is the most bytes of kind any one node sent.
func (s snapshot) maxSent(kind string) int64 {
	var m int64
	for _, b := range s.sent[kind] {
		m = max(m, b)
	}
	return m
}
