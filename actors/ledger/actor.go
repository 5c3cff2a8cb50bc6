package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/actors/domain"
	"peerdns/internal/applied"
	"peerdns/internal/mailbox"
	"peerdns/internal/stack"
	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/supervisor"
	"peerdns/transport/identity"
)

// Deps are what the ledger actor needs from the node.
type Deps struct {
	Identity  *identity.Identity
	Ledger    *store.DB // ledger.db, opened Durable
	Node      *store.DB // node.db: IPs, subnets, hash preferences
	Published *view.Published
	// Internal domains (admin, plugins) and the address DNS answers them
	// with. They appear in the listing with hash "internal" and cannot be
	// claimed.
	Internal map[string]netip.Addr
	// Join is set when the node was started with --join: it waits for
	// JoinNetwork instead of creating a network of its own.
	Join           bool
	SubnetBase     string // SUBNET_BASE setting, "" = ipam.DefaultBase
	InitialIPIndex int
	Log            *slog.Logger
	Now            func() time.Time
	// DomainMiddleware wraps the Receive of every domain actor. Only tests
	// set it (to crash a real domain actor and watch it restart).
	DomainMiddleware []actor.ReceiverMiddleware
	// Applied is advanced past every op this actor applies (nil: not
	// shared); the peer sessions read it to drop duplicates unverified.
	Applied *applied.Vector
	// ClaimGap and VoteGap are the least time between two commits of our
	// own claims, and of our own auto-votes; EvalGap between two rounds
	// of the evaluations nobody waits for (pacing.go). 0 = the defaults,
	// negative = no pacing.
	ClaimGap, VoteGap, EvalGap time.Duration
	// VoteHold is how long our votes wait from the first queued beyond
	// R writers (pacing.go). 0 = DefaultVoteHold, negative = no hold.
	VoteHold time.Duration
	// Replicas is R, the replica-set size (REPLICA_SET_SIZE): beyond R
	// writers a domain's votes come from the R writers closest to it
	// (actors/consensus/replica.go). 0 = consensus.DefaultReplicas.
	Replicas int
}

// Props builds the ledger actor. Its domain children restart with backoff.
func Props(d Deps) *actor.Props {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.ClaimGap == 0 {
		d.ClaimGap = DefaultClaimGap
	}
	if d.VoteGap == 0 {
		d.VoteGap = DefaultVoteGap
	}
	if d.EvalGap == 0 {
		d.EvalGap = DefaultEvalGap
	}
	if d.VoteHold == 0 {
		d.VoteHold = DefaultVoteHold
	}
	return actor.PropsFromProducer(func() actor.Actor { return newActor(d) },
		actor.WithSupervisor(supervisor.Backoff()), actor.WithDispatcher(stack.Actors),
		actor.WithMailbox(mailbox.Producer(operatorFirst)))
}

// operatorFirst picks what the ledger handles before the peers' ops and
// its own work queued ahead of it (internal/mailbox): the admin API's
// and the WebSocket's reads, the health probe's and the metrics scrape's
// questions, none of which changes the ledger's state; the operator's
// add-domain and remove-domain requests; and the group commit of our
// queued claims (commitClaims, the claims' pacing timer). The peer
// network's questions (vectors, ops since) keep their place: a session
// asks them in order with the ops it sent.
//
// Why the claims: a claim is our writer's next op, and the peers' ops
// it overtakes are other writers' (each writer's ops apply in their own
// order whatever comes between), so it commits as it would have had it
// come a moment earlier; a conflict with a claim still queued is the
// same conflict either way, settled by consensus (and a joiner whose
// own writer op is still queued refuses the claim as not initialised, as
// it would have a moment earlier). Committed at once, it reaches the
// peers while they are still taking the burst's other claims. TestOperatorClaimOvertakesPeerOps shows the backlog case: the
// claim committed after 3 clock readings with 97 of 100 ops messages
// still queued, and not before the backlog in arrival order. Fifty
// processes (100 claims from five nodes, interleaved runs) read 8.89 s
// (median of 11 runs) → 7.52 s (9 runs) from the first claim to resolved
// alike on all 50, and the claims acknowledged in 4.95 → 5.02 s: in a
// spread of 6-10.5 s either way, no gain the runs can show. Our votes'
// commits keep their place: put first too (with the claims), the burst
// took 8.10-8.86 s against 6.87-8.68 with the requests alone first
// (three pairs): a vote committed before the ops queued behind it are
// evaluated leaves their votes to another op.
func operatorFirst(msg any) bool {
	switch msg.(type) {
	case *messages.GetDomains, *messages.GetEntries, *messages.GetConsensus, *messages.GetSidecarStatus,
		*messages.GetConsensusMetrics, *messages.GetP2PConflicts,
		*messages.AddDomain, *messages.RemoveDomain, *commitClaims:
		return true
	}
	return false
}

// Actor owns the ledger state. All fields are touched only from Receive.
type Actor struct {
	d  Deps
	st *state

	addrs    *addresses // the domains' local IPs (addresses.go)
	hashPref map[string]string
	active   map[string]bool // connected writers (not self)
	children map[string]*actor.PID
	results  map[string]*domain.Evaluated
	// members orders the writers for replica-set picks; rebuilt when the
	// writer set grows (members()).
	memberSet *consensus.Membership
	epoch     uint64 // bumped on every change of the active peer set
	// m is the scheduling core (machine.go): commit pacing, evaluation
	// rounds, waiters, the publish schedule.
	m           *machine
	version     uint64
	list        listing // GET /api/resolved-domains as last built (listing.go)
	lastApplyAt int64
	validFail   int
	bootstrap   bool
	counts      struct{ resolutions, quorumFailures, ties int }

	lag             lagWindow // how long peers' ops wait in our mailbox (pacing.go)
	pendingCleanups []cleanupRequest
	failedCleanups  []cleanupRequest // their commit failed: run again at the retry timer
	sys             *actor.ActorSystem

	// internal is Deps.Internal plus the domains other owners added
	// (messages.SetInternalDomains: plugins), by owner in extraInternal.
	internal      map[string]netip.Addr
	extraInternal map[string]map[string]netip.Addr

	// The last published snapshot and what changed since (see publish):
	// the domains whose claims, result or address may differ, and whether
	// the internal domains did.
	lastSnap        *view.Snapshot
	pubChanged      map[string]bool
	internalChanged bool
}

func newActor(d Deps) *Actor {
	m := newMachine(d.ClaimGap, d.VoteGap, d.EvalGap, publishGap)
	m.waitLimit = waitLimit
	return &Actor{d: d, st: newState(d.Identity.ID()), m: m}
}

// Receive dispatches one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.sys = c.ActorSystem()
		a.mergeInternal()
		if err := a.load(); err != nil {
			// Without its ledger the node cannot serve names: fail loudly,
			// the supervisor restarts us with backoff.
			panic(fmt.Sprintf("ledger load: %v", err))
		}
		a.markAll()
		a.sys.EventStream.Publish(&messages.LedgerLoaded{})
	case *domain.Evaluated:
		a.onEvaluated(c, m)
	case *domain.Restarted:
		if pid := a.children[m.Domain]; pid != nil {
			a.step(c, Restarted{Domain: m.Domain})
		}
	case *commitClaims:
		a.commitQueuedClaims(c, m.gen)
	case *applyOpsNow:
		a.applyQueuedOps(c)
	case *commitVotes:
		a.commitQueuedVotes(c)
	case *publishNow:
		a.step(c, Fired{Kind: timerPublish})
	case *evalNow:
		a.step(c, Fired{Kind: timerEval})
	case *retryWrites:
		a.pendingCleanups = append(a.failedCleanups, a.pendingCleanups...)
		a.failedCleanups = nil
		a.step(c, Fired{Kind: timerRetry})
	default:
		a.handle(c, m)
	}
	a.flush(c)
}

// load reads the ledger and node settings from disk.
func (a *Actor) load() error {
	a.children = map[string]*actor.PID{}
	a.results = map[string]*domain.Evaluated{}
	a.pubChanged = map[string]bool{}
	a.lastSnap = nil
	a.list = listing{}
	a.active = map[string]bool{}
	a.hashPref = map[string]string{}

	if v, err := a.d.Ledger.Get(metaNetwork); err == nil {
		a.st.network = v
	}
	if v, err := a.d.Ledger.Get(metaRoot); err == nil {
		a.st.root = v
	}
	if v, err := a.d.Ledger.Get(metaInviter); err == nil {
		a.st.inviter = v
	}
	kvs, err := a.d.Ledger.List(opPrefix)
	if err != nil {
		return err
	}
	ops := make([]*messages.Op, 0, len(kvs))
	for _, kv := range kvs {
		var op messages.Op
		if err := messages.Unmarshal([]byte(kv.Value), &op); err != nil {
			return fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		ops = append(ops, &op)
	}
	checkSigs(ops)
	// Keys sort by writer then zero-padded seq, so this is log order; the
	// fixpoint still handles writers authorised by later writers' ops.
	if _, _, rejected := a.applyBatch(ops, false); len(rejected) > 0 {
		a.d.Log.Warn("ledger: ops on disk no longer apply", "count", len(rejected))
	}

	addrs, err := loadAddresses(a.d.Node, a.d.Log, a.d.SubnetBase, a.d.InitialIPIndex)
	if err != nil {
		return err
	}
	a.addrs = addrs
	prefs, err := a.d.Node.List(prefHashPrefix)
	if err != nil {
		return err
	}
	for _, kv := range prefs {
		a.hashPref[strings.TrimPrefix(kv.Key, prefHashPrefix)] = kv.Value
	}

	// A start that created the network and stopped before its genesis op
	// was committed left the key and root without the op (no op of ours):
	// the op is written now, or this node is never a writer of its own
	// network.
	if !a.d.Join && (a.st.network == "" || (a.st.root == a.st.self && a.st.vv[a.st.self] == 0)) {
		if err := a.genesis(); err != nil {
			return err
		}
	}
	a.d.Log.Info("ledger loaded", "ops", a.st.length, "domains", len(a.st.domains), "network", a.st.network != "", "writer", a.st.writers[a.st.self])
	return nil
}

// genesis creates a new network with this node as root writer: the key
// and root in the meta keys, then the genesis op. The two are separate
// commits; when the key is on disk already (a start stopped between
// them) only the op is written, with that key.
func (a *Actor) genesis() error {
	if a.st.network == "" {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		key := hex.EncodeToString(raw)
		if err := a.d.Ledger.Update(func(tx *store.Tx) error {
			if err := tx.Set(metaRoot, a.st.self); err != nil {
				return err
			}
			return tx.Set(metaNetwork, key)
		}); err != nil {
			return err
		}
		a.st.network = key
	}
	a.st.root = a.st.self
	_, err := a.appendLocal(write{key: messages.NetworkKey(a.st.self), value: a.st.network})
	if err == nil {
		a.d.Log.Info("created network as master", "root", a.st.self)
	}
	return err
}

// Storage keys.
const (
	opPrefix       = "op:"
	metaNetwork    = "meta:network"
	metaRoot       = "meta:root"
	metaInviter    = "meta:inviter"
	prefHashPrefix = "hashpref:"
)

func opKey(op *messages.Op) string {
	return opPrefix + op.Writer + ":" + fmt.Sprintf("%020d", op.Seq)
}

// markAll makes every domain dirty (to the machine; no I/O follows).
// activeChanges lists the writers that joined or left the active set
// with next (ids that are not writers count for nothing).
func (a *Actor) activeChanges(next map[string]bool) []string {
	var out []string
	for id := range next {
		if !a.active[id] && a.st.writers[id] {
			out = append(out, id)
		}
	}
	for id := range a.active {
		if !next[id] && a.st.writers[id] {
			out = append(out, id)
		}
	}
	return out
}

// markVotersChanged marks the domains whose quorum the active writers in
// changed decide. Up to R writers every writer votes on every domain:
// all of them. Beyond R a writer counts only in the replica sets it is
// part of (about R of every n), so only those domains are evaluated
// again: at 50 writers half of them, at 1,000 one in forty. A session
// that comes and goes under load thus costs the domains it votes on,
// not every domain of the ledger.
func (a *Actor) markVotersChanged(changed []string) {
	members := a.members()
	if !members.Sparse() {
		a.markAll()
		return
	}
	var ds []string
	seen := map[string]bool{}
	mark := func(d string) {
		if seen[d] {
			return
		}
		seen[d] = true
		reps := members.Replicas(d)
		for _, id := range changed {
			if reps[id] {
				ds = append(ds, d)
				return
			}
		}
	}
	for d := range a.st.domains {
		mark(d)
	}
	for d := range a.results {
		mark(d)
	}
	if len(ds) > 0 {
		a.m.Step(Touch{Domains: ds}, time.Now())
	}
}

func (a *Actor) markAll() {
	ds := make([]string, 0, len(a.st.domains)+len(a.results))
	for d := range a.st.domains {
		ds = append(ds, d)
	}
	for d := range a.results {
		ds = append(ds, d)
	}
	a.m.Step(Touch{Domains: ds}, time.Now())
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
