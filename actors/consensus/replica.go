package consensus

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
)

// DefaultReplicas is R, the replica-set size: up to R writers every
// active writer votes on every domain (the rules above, unchanged);
// beyond R only the R writers closest to a domain vote on it.
const DefaultReplicas = 24

// Membership is the writers of a network ordered for replica-set picks.
// Every node builds it from the same signed membership (the ledger's
// writer ops) and the same network id, so every node picks the same
// replica set for a domain without talking about it.
//
// Distance is XOR of SHA-256(network id, 0, name) against
// SHA-256(network id, 0, writer id), compared as big-endian numbers (a
// Kademlia metric). Salting with the network id means a key cannot be
// ground before the network exists to sit next to a chosen domain, and a
// writer cannot change its key afterwards without a new invite from a
// writer; a writer alone cannot move a domain's replica set, which
// depends only on the domain and the membership.
//
// Built once per membership change; read-only afterwards (safe to share)
// but for a cache of the picks made so far: a ledger asks for a domain's
// replica set at every evaluation of it and for every domain whenever a
// voter's liveness changes, and the pick (a SHA-256 and a pass over every
// writer) was 5% of a node's CPU in a burst of claims on fifty
// processes. The cache holds at most maxPicks sets and starts over when
// full; a membership change builds a new Membership and so a new cache.
type Membership struct {
	salt    string
	r       int
	ids     []string
	digests [][sha256.Size]byte

	mu    sync.Mutex
	picks map[string]map[string]bool
}

// maxPicks bounds a Membership's cache of replica sets: about 0.7 KB
// each at R = 24, so under 3 MB when full.
const maxPicks = 4096

// NewMembership orders writers for picks of r replicas (r ≤ 0: the
// default). With at most r writers every pick is "all of them".
func NewMembership(network string, writers []string, r int) *Membership {
	if r <= 0 {
		r = DefaultReplicas
	}
	m := &Membership{salt: network, r: r, ids: slices.Clone(writers)}
	slices.Sort(m.ids)
	m.digests = make([][sha256.Size]byte, len(m.ids))
	for i, id := range m.ids {
		m.digests[i] = m.digest(id)
	}
	return m
}

func (m *Membership) digest(s string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(m.salt))
	h.Write([]byte{0})
	h.Write([]byte(s))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Size is the number of writers.
func (m *Membership) Size() int { return len(m.ids) }

// Has reports whether id is one of the writers.
func (m *Membership) Has(id string) bool {
	_, ok := slices.BinarySearch(m.ids, id)
	return ok
}

// Sparse reports whether the network is beyond R: only then do replica
// sets differ from the whole membership.
func (m *Membership) Sparse() bool { return len(m.ids) > m.r }

// Replicas is the replica set of domain: nil when the network has at
// most R writers (every writer votes, today's rules exactly), else the R
// writers closest to the domain (ties by writer id, which cannot happen
// for distinct ids short of a SHA-256 collision). The set is shared
// with every other caller asking for the same domain: read it, never
// change it.
func (m *Membership) Replicas(domain string) map[string]bool {
	if !m.Sparse() {
		return nil
	}
	m.mu.Lock()
	p, ok := m.picks[domain]
	m.mu.Unlock()
	if ok {
		return p
	}
	p = m.pick(domain)
	m.mu.Lock()
	if m.picks == nil || len(m.picks) >= maxPicks {
		m.picks = make(map[string]map[string]bool)
	}
	m.picks[domain] = p
	m.mu.Unlock()
	return p
}

// pick computes domain's replica set.
func (m *Membership) pick(domain string) map[string]bool {
	target := m.digest(domain)
	// Keep the r closest seen so far, sorted, in best; a writer farther
	// than the current r-th is rejected on the first 8 bytes of its
	// distance, so a pick costs about one comparison per writer.
	best := make([]int, 0, m.r)
	for i := range m.digests {
		if len(best) == m.r && !m.closer(i, best[len(best)-1], &target) {
			continue
		}
		at := len(best)
		for at > 0 && m.closer(i, best[at-1], &target) {
			at--
		}
		if len(best) < m.r {
			best = append(best, 0)
		}
		copy(best[at+1:], best[at:len(best)-1])
		best[at] = i
	}
	out := make(map[string]bool, m.r)
	for _, i := range best {
		out[m.ids[i]] = true
	}
	return out
}

// closer reports whether writer i is closer to target than writer j
// (ties, impossible for distinct writers, by id).
func (m *Membership) closer(i, j int, target *[sha256.Size]byte) bool {
	a, b := &m.digests[i], &m.digests[j]
	for k := 0; k < sha256.Size; k += 8 {
		x := binary.BigEndian.Uint64(a[k:]) ^ binary.BigEndian.Uint64(target[k:])
		y := binary.BigEndian.Uint64(b[k:]) ^ binary.BigEndian.Uint64(target[k:])
		if x != y {
			return x < y
		}
	}
	return m.ids[i] < m.ids[j]
}

// Restrict narrows in to a replica set: only active replicas count as
// active peers (so ActivePeers and MinVotes are the replica set's), and
// AutoVote plans no vote for a self outside it. A nil replica set leaves
// in as it is.
func Restrict(in Input, replicas map[string]bool) Input {
	if replicas == nil {
		return in
	}
	active := make(map[string]bool, len(replicas))
	for id := range replicas { // R of them, fewer than the active writers
		if in.Active[id] {
			active[id] = true
		}
	}
	in.Active = active
	in.Replicas = replicas
	return in
}
