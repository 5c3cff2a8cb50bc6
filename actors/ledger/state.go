package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"peerdns/actors/consensus"
	"peerdns/messages"
)

// Reasons an op is refused. Signature, key and authorisation failures are
// validation failures; gaps and duplicates are not (they are normal in
// replication).
var (
	errBadSig       = errors.New("bad signature")
	errKeyOwner     = errors.New("key does not carry the writer's id")
	errUnauthorised = errors.New("writer is not authorised")
	errDuplicate    = errors.New("duplicate op")
	errGap          = errors.New("op after a gap")
)

// state is the ledger as a pure state machine: the op log by writer, the
// last-writer-wins key view, the writer set and a per-domain index. It does
// no I/O; the actor persists ops before calling apply.
type state struct {
	self    string
	network string // network key hex, "" until created or joined
	root    string // root writer id
	inviter string // the peer that let us in, "" if we created the network

	vv      messages.VersionVector
	log     map[string][]*messages.Op // writer → ops in seq order (log[w][i].Seq == i+1)
	kv      map[string]entry          // key → winning write (tombstones kept for LWW)
	writers map[string]bool
	pending map[string]map[string]bool // adding writer → ids it added but that were not yet authorised

	domains map[string]*domainIndex
	// changes counts the changes to every domain index; a domain's
	// version is the count at its last change, so it never repeats,
	// not even for a domain that was emptied and claimed again.
	changes uint64
	length  int // ops held
	clock   messages.HLC
}

// domainIndex is every live claim and vote of one domain.
type domainIndex struct {
	claims  map[string]entry                // claimant → its claim
	records map[string]messages.ClaimRecord // claimant → its decoded claim value
	votes   map[voteOf]entry                // voter and claimant → the vote
	version uint64                          // state.changes at its last change; the consensus cache key
}

// entry is one key write as the state keeps it: the op that carries it
// and, for a batch, which of its writes, so a batch's writes are kept
// without a copy. An op made for each write costs 144 bytes of heap per
// write kept, a tenth of what a ledger holds per domain with 24 voters
// (BenchmarkMemoryPerDomain: 18.8 KB that way, 16.1-17.4 with entries), and
// an allocation per write at every apply.
type entry struct {
	op *messages.Op
	i  int // index in op.Batch; -1: op writes one key
}

// writeAt is write i of op (pks order: op itself when it writes one key).
func writeAt(op *messages.Op, i int) entry {
	if len(op.Batch) == 0 {
		return entry{op, -1}
	}
	return entry{op, i}
}

func (e entry) Key() string {
	if e.i < 0 {
		return e.op.Key
	}
	return e.op.Batch[e.i].Key
}

func (e entry) Value() string {
	if e.i < 0 {
		return e.op.Value
	}
	return e.op.Batch[e.i].Value
}

func (e entry) Delete() bool {
	if e.i < 0 {
		return e.op.Delete
	}
	return e.op.Batch[e.i].Delete
}

// voteOf keys a domain's votes. Its two ids are the parsed parts of the
// vote's key (substrings of a string the op keeps anyway): a key made by
// joining them costs 144 bytes of heap per vote, a seventh of what a
// ledger holds per domain with 24 voters (BenchmarkMemoryPerDomain: 22.0
// KB that way, 18.8 with the ids apart).
type voteOf struct{ voter, claimant string }

// compare orders votes by voter, then claimant.
func (v voteOf) compare(o voteOf) int {
	if c := strings.Compare(v.voter, o.voter); c != 0 {
		return c
	}
	return strings.Compare(v.claimant, o.claimant)
}

func newState(self string) *state {
	return &state{
		self:    self,
		vv:      messages.VersionVector{},
		log:     map[string][]*messages.Op{},
		kv:      map[string]entry{},
		writers: map[string]bool{},
		pending: map[string]map[string]bool{},
		domains: map[string]*domainIndex{},
	}
}

// maxClockAhead is how far ahead of our wall clock another writer's op
// may be dated and still move our clock.
const maxClockAhead = time.Hour

// observe merges the clock of an op just applied so later local ops
// order after it. Our own ops always count (they must stay in order for
// last-writer-wins on our keys). Another writer's op dated more than
// maxClockAhead past nowMS does not: one op dated a century ahead (a
// broken clock or a hostile writer) moved every node's clock there for
// good, and with its logical counter at the top, every later op of
// every node carried one and the same date, so a resolved claimant's
// cleanup request was no longer later than the entries it should drop.
// Such an op is still applied (it is valid, and only its writer's keys
// follow its date).
func (s *state) observe(op *messages.Op, nowMS int64) {
	if op.Writer != s.self && op.HLC.Wall > nowMS+maxClockAhead.Milliseconds() {
		return
	}
	if s.clock.Less(op.HLC) {
		s.clock = op.HLC
	}
}

// verify checks an op without changing anything and returns the parsed
// key of each of its writes (Writes order). A batch is refused whole when
// any write is malformed or belongs to another writer, a key repeats, or
// it has more than MaxBatch writes.
func (s *state) verify(op *messages.Op) ([]messages.ParsedKey, error) {
	pks, err := parseWrites(op)
	if err != nil {
		return nil, err
	}
	if op.Seq == 0 {
		return nil, fmt.Errorf("seq 0")
	}
	// Sequence first: duplicates are common in replication and must not
	// pay for a signature check (a forged op with an old or future seq is
	// dropped either way, it just is not counted as a failure).
	switch have := s.vv[op.Writer]; {
	case op.Seq <= have:
		return pks, errDuplicate
	case op.Seq > have+1:
		return pks, errGap
	}
	if !op.SigChecked {
		msg, err := op.SigningBytes()
		if err != nil {
			return nil, err
		}
		if !messages.VerifyPeer(op.Writer, msg, op.Sig) {
			return nil, errBadSig
		}
	}
	for _, pk := range pks {
		if !s.authorised(op, pk) {
			return nil, errUnauthorised
		}
	}
	return pks, nil
}

// errBadBatch: a batched op that cannot be applied whole.
var errBadBatch = errors.New("malformed batch")

// parseWrites parses the key of every write of op and checks that each
// carries the op's writer.
func parseWrites(op *messages.Op) ([]messages.ParsedKey, error) {
	if len(op.Batch) > 0 && (op.Key != "" || op.Value != "" || op.Delete) {
		return nil, fmt.Errorf("%w: both a key and a batch", errBadBatch)
	}
	if len(op.Batch) > messages.MaxBatch || op.WritesBytes() > messages.MaxBatchBytes {
		return nil, fmt.Errorf("%w: %d writes, %d bytes (at most %d, %d)", errBadBatch, len(op.Batch), op.WritesBytes(), messages.MaxBatch, messages.MaxBatchBytes)
	}
	keys := []string{op.Key}
	if len(op.Batch) > 0 {
		keys = make([]string, len(op.Batch))
		for i := range op.Batch {
			keys[i] = op.Batch[i].Key
		}
	}
	pks := make([]messages.ParsedKey, len(keys))
	var seen map[string]bool
	if len(keys) > 1 {
		seen = make(map[string]bool, len(keys))
	}
	for i, key := range keys {
		pk, err := messages.ParseKey(key)
		if err != nil {
			return nil, err
		}
		if pk.Writer != op.Writer {
			return nil, errKeyOwner
		}
		if seen != nil {
			if seen[key] {
				return nil, fmt.Errorf("%w: key %s written twice", errBadBatch, key)
			}
			seen[key] = true
		}
		pks[i] = pk
	}
	return pks, nil
}

// mayConnect says whether id may hold a peer session as a writer. Until
// our own ledger holds the op that made us a writer, it cannot show that
// anyone is one: the joiner has the network's key and root from the
// inviter's accept and nothing else. Refusing every peer then would
// leave it so for good once the join session drops before the first
// sync (a peer dialing in at that moment replaces it), so until then the
// root and the inviter count: the inviter proved its key in the TLS
// handshake of the session that accepted our invite, the invite came
// from the operator, and every op either sends is still checked against
// the chain of writers from the root.
func (s *state) mayConnect(id string) bool {
	if s.writers[id] {
		return true
	}
	return !s.writers[s.self] && id != "" && (id == s.root || id == s.inviter)
}

func (s *state) authorised(op *messages.Op, pk messages.ParsedKey) bool {
	if s.writers[op.Writer] {
		return true
	}
	// The genesis op of the network we belong to is written by the root
	// before anyone is a writer.
	return pk.Kind == messages.KeyNetwork && s.root != "" && op.Writer == s.root
}

// apply adds a verified op (call verify first; pks are its parsed keys)
// and returns the domains it touched. The caller merges its clock
// (observe).
func (s *state) apply(op *messages.Op, pks []messages.ParsedKey) []string {
	s.vv[op.Writer] = op.Seq
	s.log[op.Writer] = append(s.log[op.Writer], op)
	s.length++
	var touched []string
	for i, pk := range pks {
		if d := s.applyWrite(writeAt(op, i), pk); d != "" {
			touched = append(touched, d)
		}
	}
	return touched
}

// applyWrite applies one key write and returns the domain it touched
// ("" for none).
func (s *state) applyWrite(w entry, pk messages.ParsedKey) string {
	key, op := w.Key(), w.op
	if cur, ok := s.kv[key]; ok && !lww(cur.op, op) {
		return "" // an older write arriving late changes nothing
	}
	s.kv[key] = w
	switch pk.Kind {
	case messages.KeyNetwork:
		s.writers[op.Writer] = true
		if s.network == "" {
			s.network = w.Value()
		}
		s.promote(op.Writer)
	case messages.KeyWriter:
		if w.Delete() {
			return ""
		}
		if s.pending[op.Writer] == nil {
			s.pending[op.Writer] = map[string]bool{}
		}
		s.pending[op.Writer][pk.Subject] = true
		s.promote(op.Writer)
	case messages.KeyClaim, messages.KeyVote:
		if !canonicalDomain(pk.Domain) {
			// Kept in the log (replication needs every op) but never a
			// domain: no consensus, no vote, no address, not listed.
			return ""
		}
		s.index(w, pk)
		return pk.Domain
	case messages.KeyCleanup:
		return pk.Domain
	}
	return ""
}

// promote makes the writers added by `by` writers, transitively, once `by`
// itself is one.
func (s *state) promote(by string) {
	if !s.writers[by] {
		return
	}
	for id := range s.pending[by] {
		if !s.writers[id] {
			s.writers[id] = true
			s.promote(id)
		}
	}
}

// lww says whether next wins over cur: last writer wins by (hlc, writer).
func lww(cur, next *messages.Op) bool {
	if cur.HLC != next.HLC {
		return cur.HLC.Less(next.HLC)
	}
	if cur.Writer != next.Writer {
		return cur.Writer < next.Writer
	}
	return cur.Seq < next.Seq
}

func (s *state) index(w entry, pk messages.ParsedKey) {
	d := s.domains[pk.Domain]
	if d == nil {
		d = &domainIndex{claims: map[string]entry{}, records: map[string]messages.ClaimRecord{}, votes: map[voteOf]entry{}}
		s.domains[pk.Domain] = d
	}
	s.changes++
	d.version = s.changes
	switch pk.Kind {
	case messages.KeyClaim:
		if w.Delete() {
			delete(d.claims, pk.Writer)
			delete(d.records, pk.Writer)
		} else {
			// A record that does not decode, or whose hash is no tunnel
			// hash, is no claim: counted, its empty or foreign hash made
			// the domain's consensus "error" on every node, so one writer
			// could stop any other peer's name from resolving.
			rec, err := decodeClaim(w.Value())
			if err != nil || messages.ValidHash(rec.Hash) != nil {
				delete(d.claims, pk.Writer)
				delete(d.records, pk.Writer)
			} else {
				d.claims[pk.Writer] = w
				d.records[pk.Writer] = rec
			}
		}
	case messages.KeyVote:
		k := voteOf{pk.Writer, pk.Claimant}
		if w.Delete() {
			delete(d.votes, k)
		} else {
			d.votes[k] = w
		}
	}
	if len(d.claims) == 0 && len(d.votes) == 0 {
		delete(s.domains, pk.Domain)
	}
}

// input builds the consensus input of a domain (copies, safe to send).
func (s *state) input(domain string, active map[string]bool) consensus.Input {
	in := consensus.Input{Active: active}
	d := s.domains[domain]
	if d == nil {
		return in
	}
	in.Claims = make([]consensus.Claim, 0, len(d.claims))
	in.Votes = make([]consensus.Vote, 0, len(d.votes))
	for w, e := range d.claims {
		rec := d.records[w]
		in.Claims = append(in.Claims, consensus.Claim{Writer: w, Hash: rec.Hash, SSL: rec.SSL, HLC: e.op.HLC})
	}
	for k, e := range d.votes {
		in.Votes = append(in.Votes, consensus.Vote{Voter: k.voter, Claimant: k.claimant, HLC: e.op.HLC})
	}
	slices.SortFunc(in.Claims, func(a, b consensus.Claim) int { return strings.Compare(a.Writer, b.Writer) })
	slices.SortFunc(in.Votes, func(a, b consensus.Vote) int {
		if c := strings.Compare(a.Voter, b.Voter); c != 0 {
			return c
		}
		return strings.Compare(a.Claimant, b.Claimant)
	})
	return in
}

// claim returns the live claim record of writer on domain.
func (s *state) claim(domain, writer string) (messages.ClaimRecord, bool) {
	d := s.domains[domain]
	if d == nil {
		return messages.ClaimRecord{}, false
	}
	if _, ok := d.claims[writer]; !ok {
		return messages.ClaimRecord{}, false
	}
	return d.records[writer], true
}

// unvoted says whether domain has claims and no vote of ours: its
// evaluation will ask us to vote.
func (s *state) unvoted(domain string) bool {
	d := s.domains[domain]
	if d == nil || len(d.claims) == 0 {
		return false
	}
	for k := range d.votes {
		if k.voter == s.self {
			return false
		}
	}
	return true
}

// myVotes lists the claimants self has live votes for on domain.
func (s *state) myVotes(domain string) []string {
	d := s.domains[domain]
	if d == nil {
		return nil
	}
	var out []string
	for k := range d.votes {
		if k.voter == s.self {
			out = append(out, k.claimant)
		}
	}
	sort.Strings(out)
	return out
}

// opsSince returns the ops a holder of vv lacks, in (writer, seq) order.
func (s *state) opsSince(vv messages.VersionVector, max int, only map[string]bool) []*messages.Op {
	writers := make([]string, 0, len(s.log))
	for w := range s.log {
		if only == nil || only[w] {
			writers = append(writers, w)
		}
	}
	sort.Strings(writers)
	var out []*messages.Op
	for _, w := range writers {
		have := vv[w]
		ops := s.log[w]
		if have >= uint64(len(ops)) {
			continue
		}
		for _, op := range ops[have:] {
			if max > 0 && len(out) >= max {
				return out
			}
			out = append(out, op)
		}
	}
	return out
}

func decodeClaim(v string) (messages.ClaimRecord, error) {
	var rec messages.ClaimRecord
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return rec, fmt.Errorf("claim record: %w", err)
	}
	if rec.Clients == nil {
		rec.Clients = []string{}
	}
	if rec.Services == nil {
		rec.Services = []messages.Service{}
	}
	return rec, nil
}

func encodeClaim(rec messages.ClaimRecord) string {
	if rec.Clients == nil {
		rec.Clients = []string{}
	}
	if rec.Services == nil {
		rec.Services = []messages.Service{}
	}
	b, _ := json.Marshal(rec) // a struct of strings, ints and bools cannot fail
	return string(b)
}

// canonicalDomain says whether domain is a name the node's own API would
// write: a valid DNS name in its normal form (lower case, no final dot).
// Another writer's op can carry any key; markup, spaces, "ADMIN.P2P" or
// "admin.p2p." must not become domains that this node votes for, gives an
// address and lists.
func canonicalDomain(domain string) bool {
	n, err := messages.NormalizeDomain(domain)
	return err == nil && n == domain
}
