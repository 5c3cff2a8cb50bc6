package ledger

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/internal/store"
	"peerdns/messages"
)

// handle answers the request messages of the admin API and the peer
// network. Every request gets a reply, errors included.
func (a *Actor) handle(c actor.Context, msg any) {
	switch msg.(type) {
	case *messages.ApplyOps, *messages.GetVersionVector, *messages.GetOpsSince, *messages.IsWriter, *messages.GetWriters:
		// The peer network's traffic: a burst of it is what publishes are
		// paced for.
	default:
		// A request of the admin API (or a plugin): what it reads, DNS
		// and the edge proxy serve already.
		a.step(c, Read{})
	}
	switch m := msg.(type) {
	case *messages.AddDomain:
		a.addDomain(c, m)
	case *messages.RemoveDomain:
		a.removeDomain(c, m)
	case *messages.GetDomains:
		list := a.domainListing()
		c.Respond(&messages.GetDomainsReply{Domains: list, JSON: a.list.json})
	case *messages.GetEntries:
		c.Respond(&messages.GetEntriesReply{Entries: a.entries()})
	case *messages.GetConsensus:
		c.Respond(a.consensusOf(m.Domain))
	case *messages.GetSidecarStatus:
		c.Respond(&messages.GetSidecarStatusReply{Status: a.sidecar()})
	case *messages.GetConsensusMetrics:
		c.Respond(&messages.GetConsensusMetricsReply{Metrics: a.metrics()})
	case *messages.Recalculate:
		a.recalculate(c, m)
	case *messages.GetP2PConflicts:
		c.Respond(&messages.GetP2PConflictsReply{Conflicts: a.conflicts()})
	case *messages.SetHashPreference:
		c.Respond(&messages.SetHashPreferenceReply{Err: a.setHashPreference(m)})
	case *messages.SetClaimServices:
		c.Respond(&messages.SetClaimServicesReply{Err: a.setClaimServices(m)})
	case *messages.GetDomainServices:
		svcs, err := a.domainServices(m.Domain)
		c.Respond(&messages.GetDomainServicesReply{Services: svcs, Err: err})
	case *messages.GetDomainTargets:
		c.Respond(&messages.GetDomainTargetsReply{Targets: a.targets(m.Domains)})
	case *messages.GetSubnets:
		c.Respond(&messages.GetSubnetsReply{Subnets: a.addrs.describe()})
	case *messages.SetSubnets:
		c.Respond(&messages.SetSubnetsReply{Err: a.setSubnets(m.Subnets)})
	case *messages.GetInterfaces:
		c.Respond(&messages.GetInterfacesReply{Interfaces: a.addrs.assignments()})
	case *messages.SetInternalDomains:
		c.Respond(&messages.SetInternalDomainsReply{Refused: a.setInternal(c, m.Owner, m.Domains)})
	case *messages.CleanupInterfaces:
		n, err := a.cleanupInterfaces()
		c.Respond(&messages.CleanupInterfacesReply{Released: n, Err: err})

	// peer network
	case *messages.ApplyOps:
		// Group commit: the ops of every peer that arrive in one mailbox
		// burst are applied and fsynced together (applyQueuedOps), so
		// replication from many peers costs one commit, not one each.
		if !m.Sent.IsZero() {
			now := a.d.Now()
			a.lag.observe(now, now.Sub(m.Sent))
		}
		a.step(c, QueueOps{Ops: queuedOps{m: m, sender: c.Sender()}})
	case *messages.GetVersionVector:
		vv := make(messages.VersionVector, len(a.st.vv))
		for k, v := range a.st.vv {
			vv[k] = v
		}
		c.Respond(&messages.GetVersionVectorReply{VV: vv})
	case *messages.GetOpsSince:
		c.Respond(&messages.GetOpsSinceReply{Ops: a.st.opsSince(m.VV, m.Max, m.Only)})
	case *messages.IsWriter:
		c.Respond(&messages.IsWriterReply{OK: a.st.mayConnect(m.ID)})
	case *messages.GetWriters:
		c.Respond(&messages.GetWritersReply{IDs: sortedKeys(a.st.writers)})
	case *messages.AddWriter:
		c.Respond(&messages.AddWriterReply{Err: a.addWriter(m.ID)})
	case *messages.GetNetwork:
		c.Respond(&messages.GetNetworkReply{Key: a.st.network, Root: a.st.root})
	case *messages.JoinNetwork:
		c.Respond(&messages.JoinNetworkReply{Err: a.joinNetwork(m)})
	case *messages.PeerSetChanged:
		next := make(map[string]bool, len(m.Connected))
		for _, id := range m.Connected {
			next[id] = true
		}
		changed := a.activeChanges(next)
		a.active = next
		// Quorum depends on which writers are connected: the domains
		// whose voters changed are re-evaluated with the new set (the
		// epoch keys the domain actors' caches).
		if len(changed) > 0 {
			a.epoch++
			a.markVotersChanged(changed)
		}
	}
}

func (a *Actor) addDomain(c actor.Context, m *messages.AddDomain) {
	reply := func(err error) { c.Respond(&messages.AddDomainReply{Err: err}) }
	name, err := messages.NormalizeDomain(m.Domain)
	if err != nil {
		reply(err)
		return
	}
	if _, internal := a.internal[name]; internal {
		reply(fmt.Errorf("%w: %s", messages.ErrInternalDomain, name))
		return
	}
	if err := messages.ValidHash(m.Hash); err != nil {
		reply(err)
		return
	}
	if !a.writable() {
		reply(messages.ErrNotInitialised)
		return
	}
	rec, had := a.st.claim(name, a.st.self) // keep clients and services of an earlier claim
	if !m.KeepSSL || !had || !strings.EqualFold(rec.Hash, m.Hash) {
		rec.SSL = m.SSL
	}
	rec.Hash = m.Hash
	// Group commit: claims that arrive together are signed as one batched
	// op in one transaction (commitQueuedClaims, after the mailbox burst);
	// each is answered once committed and evaluated (the machine's waiters).
	at := a.d.Now()
	if !m.Asked.IsZero() {
		// How long the request waited to get here, on the wall clock
		// (Deps.Now may be a test's), taken off the ledger's now.
		if waited := time.Since(m.Asked); waited > 0 {
			at = at.Add(-waited)
		}
	}
	a.step(c, QueueClaim{Claim: queuedClaim{name: name, rec: rec, sender: c.Sender(), at: at}})
}

// commitClaims is a self-message: sign and commit the queued claims
// (gen: its timer's, Timer.Gen).
type commitClaims struct{ gen uint64 }

// queuedClaim is an add-domain waiting for the group commit.
type queuedClaim struct {
	name   string
	rec    messages.ClaimRecord
	sender *actor.PID
	at     time.Time // when the request was asked (or arrived)
}

func (a *Actor) commitQueuedClaims(c actor.Context, gen uint64) {
	q := a.step(c, Fired{Kind: timerClaims, Gen: gen}).Claims
	if len(q) == 0 {
		return
	}
	ws := make([]write, 0, 2*len(q))
	members := a.members()
	for _, qc := range q {
		ws = append(ws, write{key: messages.ClaimKey(qc.name, a.st.self), value: encodeClaim(qc.rec)})
		if reps := members.Replicas(qc.name); a.st.domains[qc.name] == nil && (reps == nil || reps[a.st.self]) {
			// Nobody has claimed or voted on the domain yet, so our
			// auto-vote is already known (consensus.AutoVote: the earliest
			// claim, ours; none beyond R outside the domain's replica
			// set): it goes in the same op instead of a second op
			// after the evaluation. A burst of claims then makes a fifth
			// fewer ops in a five-node network (each one signed, fsynced,
			// sent to every peer and checked there), and the domain
			// settles here after one commit instead of two.
			ws = append(ws, write{key: messages.VoteKey(qc.name, a.st.self, a.st.self), value: messages.VoteMarker})
		}
	}
	_, err := a.appendLocal(ws...)
	var wait Wait // the batch is answered together
	for _, qc := range q {
		if err != nil {
			if qc.sender != nil {
				c.Send(qc.sender, &messages.AddDomainReply{Err: fmt.Errorf("store claim: %w", err)})
			}
			continue
		}
		a.d.Log.Info("domain claimed", "domain", qc.name, "hash", qc.rec.Hash, "ssl", qc.rec.SSL)
		if wait.Since.IsZero() || qc.at.Before(wait.Since) {
			wait.Since = qc.at
		}
		wait.Domains = append(wait.Domains, qc.name)
		wait.Replies = append(wait.Replies, waitReply{to: qc.sender, msg: &messages.AddDomainReply{}})
	}
	if len(wait.Domains) > 0 {
		a.step(c, wait)
	}
}

func (a *Actor) removeDomain(c actor.Context, m *messages.RemoveDomain) {
	reply := func(err error) { c.Respond(&messages.RemoveDomainReply{Err: err}) }
	name, err := messages.NormalizeDomain(m.Domain)
	if err != nil {
		reply(err)
		return
	}
	if !a.writable() {
		reply(messages.ErrNotInitialised)
		return
	}
	if _, ok := a.st.claim(name, a.st.self); !ok {
		reply(fmt.Errorf("%w: %s", messages.ErrNotOwner, name))
		return
	}
	ws := []write{{key: messages.ClaimKey(name, a.st.self), del: true}}
	for _, claimant := range a.st.myVotes(name) {
		ws = append(ws, write{key: messages.VoteKey(name, a.st.self, claimant), del: true})
	}
	owner := false
	if r := a.results[name]; r != nil && r.State.Status == consensus.Resolved && r.State.ResolvedClaimant == a.st.self {
		// The resolved claimant asks every peer to drop the domain. The
		// request goes first so peers see it before our claim disappears.
		owner = true
		ws = append([]write{{key: messages.CleanupKey(name, a.st.self), value: "1"}}, ws...)
	}
	if _, err := a.appendLocal(ws...); err != nil {
		reply(fmt.Errorf("store removal: %w", err))
		return
	}
	a.d.Log.Info("domain removed", "domain", name, "resolvedClaimant", owner)
	a.step(c, Wait{Domains: []string{name}, Replies: []any{waitReply{
		to: c.Sender(), msg: &messages.RemoveDomainReply{},
		hints: []string{messages.HintTunnelClients, messages.HintLocalDNS},
	}}})
}

func (a *Actor) recalculate(c actor.Context, m *messages.Recalculate) {
	sender := c.Sender()
	if m.Domain == "" {
		names := make([]string, 0, len(a.st.domains))
		for name := range a.st.domains {
			names = append(names, name)
		}
		a.step(c, Recalc{Domains: names})
		a.step(c, Wait{Domains: []string{""}, Replies: []any{waitReply{to: sender, msg: &messages.RecalculateReply{Domains: len(names)}}}})
		return
	}
	name, err := messages.NormalizeDomain(m.Domain)
	if err != nil {
		c.Respond(&messages.RecalculateReply{Err: err})
		return
	}
	if _, ok := a.st.domains[name]; !ok {
		c.Respond(&messages.RecalculateReply{Err: fmt.Errorf("%w: no claims or votes for %s", messages.ErrNotFound, name)})
		return
	}
	a.step(c, Recalc{Domains: []string{name}})
	a.step(c, Wait{Domains: []string{name}, Replies: []any{waitReply{to: sender, msg: &messages.RecalculateReply{Domains: 1}}}})
}

func (a *Actor) setHashPreference(m *messages.SetHashPreference) error {
	name, err := messages.NormalizeDomain(m.Domain)
	if err != nil {
		return err
	}
	if m.Preference != "local" && m.Preference != "resolved" {
		return fmt.Errorf("%w: preference must be \"local\" or \"resolved\", got %q", messages.ErrInvalid, m.Preference)
	}
	if err := a.d.Node.Set(prefHashPrefix+name, m.Preference); err != nil {
		return fmt.Errorf("store preference: %w", err)
	}
	old := a.hashPref[name]
	a.hashPref[name] = m.Preference
	a.publishHint(messages.HintLocalDNS)
	if old != m.Preference && a.sys != nil {
		// Tunnel clients of the domain follow the claim now in force.
		a.sys.EventStream.Publish(&messages.HashPreferenceChanged{Domain: name, Preference: m.Preference})
	}
	return nil
}

func (a *Actor) setSubnets(in []messages.Subnet) error {
	if err := a.addrs.setSubnets(in); err != nil {
		return err
	}
	a.publishHint(messages.HintSettings)
	return nil
}

func (a *Actor) cleanupInterfaces() (int, error) {
	n, err := a.addrs.cleanup(func(name string) bool {
		idx := a.st.domains[name]
		return idx != nil && len(idx.claims) > 0
	})
	if err != nil {
		return 0, err
	}
	// The spec's Broadcast column: every cleanup, even one that freed
	// nothing (a panel that asked still refreshes its list).
	a.publishHint(messages.HintInterfaces)
	return n, nil
}

func (a *Actor) addWriter(id string) error {
	if !a.writable() {
		return messages.ErrNotInitialised
	}
	if a.st.writers[id] {
		return nil
	}
	_, err := a.appendLocal(write{key: messages.WriterKey(id, a.st.self), value: "1"})
	if err == nil {
		a.d.Log.Info("writer added", "id", id)
	}
	return err
}

func (a *Actor) joinNetwork(m *messages.JoinNetwork) error {
	if a.st.network != "" {
		if a.st.network == m.Key {
			return nil
		}
		return fmt.Errorf("already a member of another network")
	}
	if m.Key == "" || m.Root == "" {
		return fmt.Errorf("%w: network key and root are required", messages.ErrInvalid)
	}
	if err := a.d.Ledger.Update(func(tx *store.Tx) error {
		if err := tx.Set(metaRoot, m.Root); err != nil {
			return err
		}
		if err := tx.Set(metaInviter, m.Inviter); err != nil {
			return err
		}
		return tx.Set(metaNetwork, m.Key)
	}); err != nil {
		return fmt.Errorf("store network: %w", err)
	}
	a.st.network, a.st.root, a.st.inviter = m.Key, m.Root, m.Inviter
	a.d.Log.Info("joined network", "root", m.Root)
	return nil
}

// applyOpsNow is a self-message: apply the queued peer ops.
type applyOpsNow struct{}

// queuedOps is one peer's ApplyOps waiting for the group commit.
type queuedOps struct {
	m      *messages.ApplyOps
	sender *actor.PID
}

// applyQueuedOps applies every queued ApplyOps in one batch (one
// transaction) and answers each with the outcome of its own ops.
func (a *Actor) applyQueuedOps(c actor.Context) {
	q := a.step(c, Fired{Kind: timerOps}).Ops
	var all []*messages.Op
	for _, r := range q {
		all = append(all, r.m.Ops...)
	}
	applied, dups, rejected := a.applyBatch(all, true)
	outcome := make(map[*messages.Op]int, len(all)) // 1 applied, 2 duplicate, 3 rejected
	for _, op := range applied {
		outcome[op] = 1
	}
	for _, op := range dups {
		outcome[op] = 2
	}
	for _, op := range rejected {
		outcome[op] = 3
	}
	for _, r := range q {
		var rep messages.ApplyOpsReply
		var first *messages.Op // the first rejected: the one logged
		for _, op := range r.m.Ops {
			switch outcome[op] {
			case 1:
				rep.Applied++
			case 2:
				rep.Duplicates++
			case 3:
				rep.Rejected++
				if first == nil {
					first = op
				}
			default:
				rep.Gaps++
			}
		}
		if first != nil {
			// One line per peer's message, its strings cut short: they
			// are the peer's to choose, and a frame of a thousand ops
			// with long keys made as many lines of kilobytes each.
			_, err := a.st.verify(first)
			a.d.Log.Warn("ledger: rejected ops", "from", clip(r.m.From, 64), "rejected", rep.Rejected, "first.writer", clip(first.Writer, 64),
				"first.seq", first.Seq, "first.key", clip(first.Key, 160), "first.writes", first.NumWrites(), "reason", clip(fmt.Sprint(err), 200))
		}
		a.validFail += rep.Rejected
		if r.sender != nil {
			c.Send(r.sender, &rep)
		}
	}
}

// clip bounds a string a peer chose before it is logged.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
