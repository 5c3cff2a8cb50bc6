package peer

import (
	"bytes"
	"math"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/applied"
	"peerdns/messages"
)

// maxOpsFrameBytes keeps an ops frame well under transport.MaxFrameSize.
const maxOpsFrameBytes = 512 << 10

// pongEvery: the first ping of a session and every pongEvery-th after
// it ask for a pong (the round trip the diagnostics show, refreshed
// every 10 s by default). Liveness needs none: both ends ping each
// PingInterval, and every frame heard counts. Pongs to every ping were
// a fifth of a settled node's idle traffic (13 neighbours × ~23 B/s).
const pongEvery = 10

func (s *session) established(c actor.Context) {
	switch m := c.Message().(type) {
	case *frame:
		switch m.m.Kind {
		case messages.KindVV:
			// A periodic vector may predate ops we sent a moment ago that
			// are still on their way or in the peer's ledger queue: do not
			// send those again (a gap makes the peer send "want" instead).
			// Ops of writers the peer is connected to are that writer's
			// to send; answering for them too would send each op n-1 times.
			first := s.lastPeerVV == nil
			s.peerVV = copyVV(m.m.VV)
			base := copyVV(m.m.VV)
			now := s.cfg.now()
			for w, n := range s.sentVV {
				// In flight: sent within the last interval, or the peer's
				// ledger is still working through them (its vector moved).
				// Resend only what stalled for a whole interval.
				moving := m.m.VV[w] > s.lastPeerVV[w]
				if n > base[w] && (moving || now.Sub(s.sentAt[w]) < s.cfg.syncInterval) {
					base[w] = n
				}
			}
			s.lastPeerVV = copyVV(m.m.VV)
			s.noteOwed(c, m.m.VV)
			for w := range s.peerLinks {
				if w != s.cfg.hello.ID {
					base[w] = math.MaxUint64
				}
			}
			kind := syncVV
			if first {
				kind = syncFirst
			}
			s.startSync(c, base, kind, nil)
		case messages.KindIHave:
			if s.cfg.applied != nil {
				s.onIHave(c, m.m.Overlay.IDs)
			}
		case messages.KindGraft:
			s.onGraft(c, m.m.Overlay.IDs)
		case messages.KindPrune:
			s.lz.lazy = s.cfg.applied != nil
		case messages.KindDigest:
			s.onDigest(c, m.m.Overlay.Digest)
		case messages.KindWant:
			s.peerVV = copyVV(m.m.VV)
			s.startSync(c, m.m.VV, syncWant, nil)
		case messages.KindOps:
			s.onOps(c, m.m.Ops)
		case messages.KindPeers:
			// The list is the peer's connected set (minus us): remember it
			// so live ops their writer pushes to the peer are not relayed.
			s.peerLinks = make(map[string]bool, len(m.m.Peers))
			for _, p := range m.m.Peers {
				s.peerLinks[p.ID] = true
			}
			c.Send(c.Parent(), &peersLearned{from: s.peer, peers: m.m.Peers})
		case messages.KindTunnels:
			s.onTunnels(c, m.m.Tunnels)
		case messages.KindLeave:
			c.Send(c.Parent(), &peerLeft{pid: c.Self(), id: s.peer, sample: m.m.Overlay.Sample})
			s.cfg.log.Info("neighbour dropped us from its active view", "peer", short(s.peer))
			s.closing = true
			_ = s.cfg.conn.Close("left")
		case messages.KindShuffle, messages.KindShuffleReply, messages.KindHeartbeats, messages.KindSuspicions, messages.KindLiveness:
			c.Send(c.Parent(), &overlayFrame{from: s.peer, pid: c.Self(), m: m.m})
		case messages.KindConnectRequest, messages.KindConnect, messages.KindProbe, messages.KindProbeReply:
			c.Send(c.Parent(), &reachFrame{from: s.peer, pid: c.Self(), m: m.m}) // reach.go
		default:
			s.protocolError(c, "unexpected "+m.m.Kind+" after handshake")
		}
	case *pushOps:
		s.push(m.ops)
	case *askAgain:
		if !s.closing {
			s.stats.wants++
			s.sendVV(c, messages.KindWant)
		}
	case *lazyDue:
		s.onLazyDue(c)
	case *silentDue:
		s.onSilentDue(c, m)
	case *feedMe:
		s.onFeedMe()
	case *sendFrame:
		s.enqueue(m.env)
	case *sendLeave:
		s.closing = true
		env := &messages.Envelope{Kind: messages.KindLeave, Overlay: &messages.Overlay{Sample: m.sample}}
		select {
		case s.out <- outItem{env: env, closeAfter: "left"}:
		default:
			_ = s.cfg.conn.Close("left")
		}
	case *sendTunnels:
		s.announce(m.ids)
	case *sendPeers:
		// Empty when the peer is our one neighbour (addressbook.go,
		// exchange): it clears what our last list named.
		var ps []messages.PeerInfo
		for _, p := range m.peers {
			if p.ID != s.peer {
				ps = append(ps, p)
			}
		}
		s.enqueue(&messages.Envelope{Kind: messages.KindPeers, Peers: ps})
	case *tick:
		stale := s.cfg.staleAfter
		if m.staleAfter > 0 && stale > 0 {
			stale = m.staleAfter
		}
		s.lookSilent(c, m.now, stale, m.interval)
		if heard := s.heardAt(m.now); s.cfg.closeSilentAfter > 0 && m.now.Sub(heard) >= s.cfg.closeSilentAfter {
			why := "nothing heard for " + m.now.Sub(heard).Round(time.Second).String()
			s.cfg.log.Warn("closing peer connection: peer stalled", "peer", short(s.peer), "reason", why)
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "stalled", reason: why})
			s.closing = true
			_ = s.cfg.conn.Close("stalled")
			return
		}
		s.flushTunnels()
		if due(m.now, s.lastVV, s.cfg.syncInterval, m.interval) {
			s.sendDigest(c)
		}
		if due(m.now, s.lastPing, s.cfg.pingInterval, m.interval) {
			s.lastPing = m.now
			p := &messages.Ping{NoPong: true} // no pong, so no time to carry
			if s.pings%pongEvery == 0 {
				p = &messages.Ping{SentUnixNano: time.Now().UnixNano()}
			}
			s.pings++
			s.enqueue(&messages.Envelope{Kind: messages.KindPing, Ping: p})
		}
		s.stats.lazy, s.stats.pruned = s.lz.lazy, s.lz.pruned
		c.Send(c.Parent(), &statsReport{pid: c.Self(), id: s.peer, st: s.stats})
	}
}

// sendVV sends our version vector as kind (vv: periodic, want: after a
// gap); the peer answers with what we lack.
func (s *session) sendVV(c actor.Context, kind string) {
	s.lastVV = s.cfg.now()
	s.heldVV(c, func(vv messages.VersionVector) {
		if !s.closing {
			s.enqueue(&messages.Envelope{Kind: kind, VV: vv})
		}
	})
}

// heldVV hands then the vector of what this node holds: the ledger's
// applied vector, raised per writer over the ops that follow it and
// that a session verified and handed to the ledger (applied.Checked),
// which the ledger will apply as they come out of its mailbox. Every
// vector we tell a peer (a digest, a vector, a want) is this one.
//
// Why: in a burst a ledger runs seconds behind its sessions, and a
// vector of applied ops alone told every neighbour that asked to send
// again what was already here, queued: in a burst of 100 claims on 50
// processes sharing two cores, 303,077 of 392,901 ops sent were such
// repairs, and 269,776 of the ops received were applied already by the
// time the ledger got to them. Only a contiguous run counts (the
// ledger applies in seq order; an op past a gap is not held), and an
// entry is a verified op that went to the ledger, so what the vector
// claims the ledger applies: an op the ledger then refuses or drops
// after a gap is forgotten when its answer comes (onOps), and an entry
// older than twice the ledger's ask timeout (an answer that never came)
// no longer counts.
func (s *session) heldVV(c actor.Context, then func(messages.VersionVector)) {
	f := c.RequestFuture(s.cfg.ledger, &messages.GetVersionVector{}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		r, ok := res.(*messages.GetVersionVectorReply)
		if err != nil || !ok {
			s.cfg.log.Warn("version vector unavailable", "err", errText(err))
			return
		}
		then(raiseHeld(r.VV, s.cfg.checked, s.cfg.now().Add(-2*s.cfg.askTimeout)))
	})
}

// raiseHeld is vv raised, per writer, over the contiguous ops that follow
// it in checked since the given time. vv is not modified (a copy is
// made when something changes).
func raiseHeld(vv messages.VersionVector, checked *applied.Checked, since time.Time) messages.VersionVector {
	out, copied := vv, false
	for w, n := range vv {
		m := n
		for checked.SeenSince(w, m+1, since) {
			m++
		}
		if m > n {
			if !copied {
				out, copied = copyVV(vv), true
			}
			out[w] = m
		}
	}
	return out
}

// digestRefresh: a digest equal to the peer's last one is sent only
// every digestRefresh sync intervals.
//
// A digest tells the peer whether our vectors differ. When ours equals
// the last one the peer sent us, the peer holds what we hold as of its
// digest, and if it has gained ops since, its own next digest differs
// from ours and it sends it: so on an idle link both ends skip, and a
// change on either end still goes out at the next sync interval. The
// refresh bounds how long a lost or stale comparison can last. Digests
// every interval were a sixth of a settled node's idle traffic.
const digestRefresh = 4

// sendDigest is the periodic anti-entropy: a digest of our version
// vector (32 bytes however many writers there are). A peer whose vector
// differs answers with its full vector (onDigest), and we send it what it
// lacks; what we lack comes when its own digest reaches us.
func (s *session) sendDigest(c actor.Context) {
	s.lastVV = s.cfg.now()
	s.heldVV(c, func(vv messages.VersionVector) {
		if s.closing {
			return
		}
		d, now := messages.VVDigest(vv), s.cfg.now()
		if bytes.Equal(d, s.peerDigest) && now.Sub(s.digestAt) < digestRefresh*s.cfg.syncInterval {
			return
		}
		s.digestAt = now
		s.enqueue(&messages.Envelope{Kind: messages.KindDigest, Overlay: &messages.Overlay{Digest: d}})
	})
}

// onDigest answers a peer's digest with our full vector when they
// differ. When they match the peer holds exactly what we hold.
func (s *session) onDigest(c actor.Context, d []byte) {
	s.peerDigest = bytes.Clone(d)
	s.heldVV(c, func(vv messages.VersionVector) {
		if s.closing {
			return
		}
		if bytes.Equal(messages.VVDigest(vv), d) {
			s.stats.digestsEqual++
			for w, n := range vv {
				if n > s.peerVV[w] {
					s.peerVV[w] = n
				}
			}
			return
		}
		s.stats.digestsDiffer++
		s.enqueue(&messages.Envelope{Kind: messages.KindVV, VV: vv})
	})
}

// startSync sends the peer every op it lacks according to vv, in
// batches; a sync already running picks up the newest vv when it ends.
// Answering a periodic vector, a want or a graft it leaves out fresh
// ops (notFresh: those that reached us within twice our ledger's lag,
// ledgerlag.go), but for the grafted writers'; a session's first vector
// gets everything.
//
// Fresh ops are left out because they are still travelling: the peer
// lacks them as we lacked them a moment ago, and the tree (or a graft)
// brings them. In a burst on 50 processes sharing two cores a vector
// exchange went out every fifth of a second on each node, every one of
// them found ops the peer's neighbours were already sending it, and
// such repairs were 87,000 of the 232,000 ops sent. An op that did get
// lost stops being fresh within a sync interval and goes out at the
// next exchange. "Reached us" is our own clock: when a session verified
// the op (applied.Checked), so a writer's clock plays no part.
func (s *session) startSync(c actor.Context, vv messages.VersionVector, kind syncKind, exempt map[string]bool) {
	if s.syncing {
		if !s.havePending {
			s.pendingKind, s.pendingExempt, s.pendingOnly = kind, nil, true
		}
		s.pendingOnly = s.pendingOnly && kind == syncGraft
		if kind > s.pendingKind {
			s.pendingKind = kind
		}
		for w := range exempt {
			if s.pendingExempt == nil {
				s.pendingExempt = map[string]bool{}
			}
			s.pendingExempt[w] = true
		}
		s.pendingVV, s.havePending = copyVV(vv), true
		return
	}
	s.syncing, s.syncKind, s.syncExempt, s.syncOnly = true, kind, exempt, kind == syncGraft
	s.syncFrom(c, copyVV(vv))
}

// syncKind is what asked for a sync, in the order of how much it sends
// (a pending sync that merges several takes the one that sends most,
// and the exempt writers of all).
type syncKind int

const (
	syncVV    syncKind = iota // a periodic vector: fresh ops left out
	syncWant                  // a want after a gap: fresh ops left out
	syncGraft                 // a graft: the grafted writers' ops alone (syncOnly, unless merged with another kind); counted as grafted
	syncFirst                 // a session's first vector: everything
)

func (s *session) syncFrom(c actor.Context, vv messages.VersionVector) {
	var only map[string]bool
	if s.syncOnly {
		only = s.syncExempt
	}
	f := c.RequestFuture(s.cfg.ledger, &messages.GetOpsSince{VV: vv, Max: s.cfg.batch, Only: only}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		r, ok := res.(*messages.GetOpsSinceReply)
		if err != nil || !ok || s.closing {
			if err != nil {
				s.cfg.log.Warn("ops unavailable for sync", "peer", short(s.peer), "err", err)
			}
			s.syncing = false
			return
		}
		ops := r.Ops
		if s.syncKind != syncFirst {
			ops = s.notFresh(ops, s.syncExempt)
		}
		sent := s.sendOps(ops, true)
		if sent && s.syncKind == syncGraft { // a graft merged with a vector or want counts whole
			s.stats.opsGrafted += int64(len(ops))
		}
		for _, op := range r.Ops {
			if op.Seq > vv[op.Writer] {
				vv[op.Writer] = op.Seq
			}
		}
		if sent && len(r.Ops) == s.cfg.batch && s.cfg.batch > 0 {
			s.syncFrom(c, vv)
			return
		}
		s.syncing = false
		if s.havePending {
			s.havePending = false
			s.syncing, s.syncKind, s.syncExempt, s.syncOnly = true, s.pendingKind, s.pendingExempt, s.pendingOnly
			s.syncFrom(c, s.pendingVV)
		}
	})
}

// notFresh is ops without those that reached us within the freshness
// window (ledgerLag), and without the ops of their writers that follow
// them (a later op alone would make a gap at the peer); the exempt
// writers' ops all stay.
func (s *session) notFresh(ops []*messages.Op, exempt map[string]bool) []*messages.Op {
	w := s.cfg.lag.window(s.cfg.syncInterval)
	if w <= 0 {
		return ops
	}
	since := s.cfg.now().Add(-w)
	var out []*messages.Op
	var skip map[string]bool
	for i, op := range ops {
		fresh := skip[op.Writer] || !exempt[op.Writer] && s.cfg.checked.SeenSince(op.Writer, op.Seq, since)
		if !fresh {
			if out != nil || skip != nil {
				out = append(out, op)
			}
			continue
		}
		if skip == nil {
			skip = map[string]bool{}
			out = append(make([]*messages.Op, 0, len(ops)), ops[:i]...)
		}
		skip[op.Writer] = true
	}
	if skip == nil {
		return ops
	}
	return out
}

// sendOps queues ops in frames of bounded size; false if the queue filled
// (the rest comes with the next version-vector exchange).
func (s *session) sendOps(ops []*messages.Op, repair bool) bool {
	var batch []*messages.Op
	size := 0
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		// A live push names a vote's claimant by 8 bytes
		// (messages.Envelope.ShortIDs): its receiver heard of the
		// claimant, whose claim came first. A repair sends ops whole: it
		// is also what brings an op whose short claimant its receiver
		// could not resolve (onOps).
		ok := s.enqueue(&messages.Envelope{Kind: messages.KindOps, Ops: batch, ShortIDs: !repair})
		if ok {
			s.stats.opsSent += int64(len(batch))
			if repair {
				s.stats.opsRepaired += int64(len(batch))
			}
			now := s.cfg.now()
			for _, op := range batch {
				if op.Seq > s.peerVV[op.Writer] {
					s.peerVV[op.Writer] = op.Seq
				}
				if op.Seq > s.sentVV[op.Writer] {
					s.sentVV[op.Writer] = op.Seq
					s.sentAt[op.Writer] = now
				}
			}
		}
		batch, size = nil, 0
		return ok
	}
	for _, op := range ops {
		n := opSize(op)
		if len(batch) > 0 && (size+n > maxOpsFrameBytes || len(batch) >= s.cfg.batch) {
			if !flush() {
				return false
			}
		}
		batch = append(batch, op)
		size += n
	}
	return flush()
}

// opSize estimates an op's encoded size (fields plus CBOR overhead).
func opSize(op *messages.Op) int {
	return len(op.Writer) + op.WritesBytes() + len(op.Sig) + 48
}

// push forwards live ops the peer does not have yet. Ops of a writer the
// peer is connected to come from that writer itself; relaying them too
// would make every op arrive n-1 times in a full mesh. (If that direct
// push is lost, the next version-vector exchange repairs it.)
func (s *session) push(ops []*messages.Op) {
	var out []*messages.Op
	for _, op := range ops {
		if op.Writer == s.peer || op.Seq <= s.peerVV[op.Writer] {
			continue
		}
		if op.Writer != s.cfg.hello.ID && s.peerLinks[op.Writer] {
			continue
		}
		out = append(out, op)
	}
	if len(out) == 0 {
		return
	}
	if !s.lz.lazy {
		s.sendOps(out, false)
		return
	}
	// A lazy link: our own ops still go out whole (the writer is the
	// root of every tree of its ops), others as ids (session_lazy.go).
	var own, relayed []*messages.Op
	for _, op := range out {
		if op.Writer == s.cfg.hello.ID {
			own = append(own, op)
		} else {
			relayed = append(relayed, op)
		}
	}
	if len(own) > 0 {
		s.sendOps(own, false)
	}
	if len(relayed) > 0 {
		s.announceIDs(relayed)
	}
}

func (s *session) onOps(c actor.Context, ops []*messages.Op) {
	s.stats.opsReceived += int64(len(ops))
	// An op whose key names a writer by a short id we cannot resolve
	// (messages.Op.Unresolved) is dropped: a repair, which sends ops
	// whole, brings it (asked for by the gap our ledger sees when the
	// writer's next op comes, or by the next vector exchange).
	ops = slices.DeleteFunc(ops, func(op *messages.Op) bool {
		if op.Unresolved {
			s.stats.idsUnknown++
		}
		return op.Unresolved
	})
	if len(ops) == 0 {
		s.releaseCredit()
		return
	}
	// Signatures are checked here, in this peer's session (sessions run
	// side by side, one per peer), not in the ledger actor, which every
	// peer's ops go through one at a time. An op whose signature does not
	// verify goes on unmarked and the ledger refuses and counts it. An op
	// the ledger has applied already is not checked: the ledger drops it
	// as a duplicate before looking at its signature.
	// An op another session checked a moment ago (the same op over
	// another link, not applied yet) is taken on that check
	// (applied.Checked).
	held := 0 // ops applied already, or brought by another link a moment ago
	for _, op := range ops {
		if op.Held || s.cfg.applied.Has(op.Writer, op.Seq) {
			held++
			continue
		}
		msg, err := op.SigningBytes()
		if err != nil {
			continue
		}
		sum := applied.Sum(msg, op.Sig)
		switch {
		case s.cfg.checked.Has(op.Writer, op.Seq, sum):
			s.stats.sigReused++
			held++
			op.SigChecked = true
		case messages.VerifyPeer(op.Writer, msg, op.Sig):
			s.stats.sigChecks++
			s.cfg.checked.Add(op.Writer, op.Seq, sum, s.cfg.now())
			op.SigChecked = true
		default:
			s.stats.sigChecks++
		}
	}
	for _, op := range ops {
		if op.Seq > s.peerVV[op.Writer] {
			s.peerVV[op.Writer] = op.Seq
		}
	}
	if s.cfg.applied != nil && !s.closing {
		// A frame that brought nothing new prunes the link now, as
		// Plumtree prunes on the first duplicate, not once our ledger has
		// worked through it: in a burst that took seconds, and every
		// eager link kept bringing each op meanwhile.
		s.onDuplicates(held, len(ops))
	}
	// Ops the decoder skimmed as applied (transport.Conn.SkipHeld) are
	// duplicates the ledger would only count: counted here.
	all := len(ops)
	ops = slices.DeleteFunc(ops, func(op *messages.Op) bool { return op.Held })
	skimmed := all - len(ops)
	s.stats.opsDup += int64(skimmed)
	if len(ops) == 0 {
		s.releaseCredit()
		return
	}
	asked := s.cfg.now()
	f := c.RequestFuture(s.cfg.ledger, &messages.ApplyOps{From: s.peer, Ops: ops, Sent: asked}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		s.releaseCredit()
		s.cfg.lag.observe(s.cfg.now().Sub(asked))
		r, ok := res.(*messages.ApplyOpsReply)
		if err != nil || !ok {
			// No answer: the ledger may have restarted without them
			// (LedgerLoaded asks the peers again), or may still apply
			// them; either way they stop counting as on their way.
			s.cfg.log.Warn("ledger did not take peer ops", "peer", short(s.peer), "ops", len(ops), "err", errText(err))
			s.forgetUnapplied(ops)
			return
		}
		if r.Rejected > 0 || r.Gaps > 0 {
			s.forgetUnapplied(ops)
		}
		s.stats.opsDup += int64(r.Duplicates)
		if s.cfg.applied != nil && !s.closing {
			s.onDuplicates(skimmed+r.Duplicates, all)
		}
		if r.Rejected > 0 {
			s.cfg.log.Warn("peer sent ops that failed validation", "peer", short(s.peer), "rejected", r.Rejected)
		}
		if r.Gaps > 0 && !s.closing {
			// We miss earlier ops: ask the peer for everything above.
			s.stats.wants++
			s.sendVV(c, messages.KindWant)
		}
	})
}

// forgetUnapplied drops the checks of ops our ledger did not apply: they
// are not on their way there any more, and the vectors we tell (heldVV)
// stop counting them, so our peers send them again.
func (s *session) forgetUnapplied(ops []*messages.Op) {
	for _, op := range ops {
		if !s.cfg.applied.Has(op.Writer, op.Seq) {
			s.cfg.checked.Forget(op.Writer, op.Seq)
		}
	}
}
