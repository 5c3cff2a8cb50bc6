package ledger

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"peerdns/actors/consensus"
	"peerdns/internal/store"
	"peerdns/messages"
)

// write is one local change to sign.
type write struct {
	key, value string
	del        bool
}

// appendLocal signs ws as the next ops of this writer, commits them in one
// fsynced transaction and applies them. Nothing is applied if the commit
// fails.
func (a *Actor) appendLocal(ws ...write) ([]*messages.Op, error) {
	self := a.st.self
	seq := a.st.vv[self]
	clock := a.st.clock
	var wallMS int64
	ops := make([]*messages.Op, 0, 1+len(ws)/messages.MaxBatch)
	for _, chunk := range batches(ws) {
		seq++
		wallMS = a.d.Now().UnixMilli()
		clock = nextHLC(clock, wallMS)
		op := &messages.Op{Writer: self, Seq: seq, HLC: clock}
		if len(chunk) == 1 {
			op.Key, op.Value, op.Delete = chunk[0].key, chunk[0].value, chunk[0].del
		} else {
			op.Batch = make([]messages.Write, len(chunk))
			for i, w := range chunk {
				op.Batch[i] = messages.Write{Key: w.key, Value: w.value, Delete: w.del}
			}
		}
		msg, err := op.SigningBytes()
		if err != nil {
			return nil, fmt.Errorf("sign op: %w", err)
		}
		op.Sig = a.d.Identity.Sign(msg)
		// Signed here a moment ago: checking it again cost a tenth of
		// the five-node burst's signature work. The checks that are not
		// about the signature (seq, authorised writer) still run below.
		op.SigChecked = true
		ops = append(ops, op)
	}
	if err := a.persist(ops, true); err != nil {
		return nil, err
	}
	for _, op := range ops {
		pks, err := a.st.verify(op)
		if err != nil {
			// Our own op must verify; anything else is a broken invariant.
			panic(fmt.Sprintf("own op %d (%d writes) does not verify: %v", op.Seq, op.NumWrites(), err))
		}
		a.touch(a.st.apply(op, pks)...)
		a.st.observe(op, wallMS)
		a.d.Applied.Advance(op.Writer, op.Seq)
	}
	a.afterApply(ops)
	return ops, nil
}

// batches splits local writes into the ops that carry them: at most
// MaxBatch writes and MaxBatchBytes per op, a later write of a key
// replacing an earlier one of the same burst (an op may not write a key
// twice).
func batches(ws []write) [][]write {
	last := make(map[string]int, len(ws))
	for i, w := range ws {
		last[w.key] = i
	}
	kept := ws[:0:0]
	for i, w := range ws {
		if last[w.key] == i {
			kept = append(kept, w)
		}
	}
	var out [][]write
	start, size := 0, 0
	for i, w := range kept {
		n := len(w.key) + len(w.value) + 4
		if i > start && (i-start >= messages.MaxBatch || size+n > messages.MaxBatchBytes) {
			out = append(out, kept[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(kept) {
		out = append(out, kept[start:])
	}
	return out
}

// nextHLC is the hybrid logical clock step for a local event. It is
// always later than cur: a logical counter at its top carries into the
// wall milliseconds (wrapped to 0, the next op was dated before the
// clock it came from, and so was every one after it).
func nextHLC(cur messages.HLC, wallMS int64) messages.HLC {
	switch {
	case wallMS > cur.Wall:
		return messages.HLC{Wall: wallMS}
	case cur.Logical == math.MaxUint32:
		return messages.HLC{Wall: cur.Wall + 1}
	}
	return messages.HLC{Wall: cur.Wall, Logical: cur.Logical + 1}
}

// persist writes ops to the ledger file. Our own ops are fsynced before
// anything is acknowledged or sent (a seq signed twice after a crash would
// be two different ops under one number); ops from peers are committed
// lazily (store.UpdateLazy): a crash may lose the last of them, and the
// version-vector exchange on reconnect fetches them again.
func (a *Actor) persist(ops []*messages.Op, own bool) error {
	if len(ops) == 0 {
		return nil
	}
	update := a.d.Ledger.UpdateLazy
	if own {
		update = a.d.Ledger.Update
	}
	return update(func(tx *store.Tx) error {
		for _, op := range ops {
			b, err := op.MarshalCBOR() // as the codec writes it, without its reflection
			if err != nil {
				return err
			}
			if err := tx.Set(opKey(op), string(b)); err != nil {
				return err
			}
		}
		return nil
	})
}

// applyBatch verifies and applies ops (from a peer, or from disk at start
// when persist is false). Ops may come in any order: it loops until no
// more apply, so writers added by ops later in the batch are honoured.
//
// The shared applied vector advances once the ops are on disk: a vector
// ahead of what a restarted ledger holds would have sessions drop copies
// of ops it lacks as held (messages.Op.Held), and tell peers it holds
// them. A held op (its content never decoded) is a duplicate or, should
// we lack it after all, neither applied nor refused: a gap, which the
// peer's next repair fills.
func (a *Actor) applyBatch(ops []*messages.Op, persist bool) (applied []*messages.Op, dups, rejected []*messages.Op) {
	var nowMS int64 // read once, at the first op applied (observe)
	// In (writer, seq) order a writer's ops apply in one pass; in any
	// other (a peer's frame in reverse seq order) each pass applied one
	// op of each writer, a pass over the whole batch per op.
	left := ops
	if !slices.IsSortedFunc(left, cmpWriterSeq) {
		left = slices.Clone(left)
		slices.SortStableFunc(left, cmpWriterSeq)
	}
	for len(left) > 0 {
		var next []*messages.Op
		progress := false
		for _, op := range left {
			if op.Held { // no keys to parse: its seq alone tells
				if op.Seq <= a.st.vv[op.Writer] {
					dups = append(dups, op)
				}
				continue
			}
			pks, err := a.st.verify(op)
			switch {
			case errors.Is(err, errDuplicate):
				dups = append(dups, op)
			case err == nil:
				a.touch(a.st.apply(op, pks)...)
				if nowMS == 0 {
					nowMS = a.d.Now().UnixMilli()
				}
				a.st.observe(op, nowMS)
				if persist {
					// An op read back from disk had its cleanup
					// requests honoured or ignored when it was first
					// applied; nothing is evaluated yet at start.
					a.queueCleanups(op, pks)
				}
				applied = append(applied, op)
				progress = true
			default:
				next = append(next, op)
			}
		}
		left = next
		if !progress {
			break
		}
	}
	for _, op := range left {
		if _, err := a.st.verify(op); !errors.Is(err, errGap) {
			rejected = append(rejected, op)
		}
	}
	if persist && len(applied) > 0 {
		if err := a.persist(applied, false); err != nil {
			// The view now holds ops the disk does not: restart from disk.
			panic(fmt.Sprintf("persist peer ops: %v", err))
		}
	}
	for _, op := range applied {
		a.d.Applied.Advance(op.Writer, op.Seq)
	}
	if len(applied) > 0 {
		a.afterApply(applied)
	}
	return applied, dups, rejected
}

// cmpWriterSeq orders ops by writer, then seq.
func cmpWriterSeq(a, b *messages.Op) int {
	if c := strings.Compare(a.Writer, b.Writer); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// afterApply runs the consequences of newly applied ops: the event other
// actors (peers, WebSocket) listen to.
func (a *Actor) afterApply(ops []*messages.Op) {
	a.lastApplyAt = a.d.Now().UnixMilli()
	a.m.Step(Changed{}, time.Now()) // a flag only: no output
	if a.sys != nil {
		a.sys.EventStream.Publish(&messages.OpsApplied{Ops: ops})
	}
}

// cleanupRequest is a claimant's request that every peer drop its
// entries on a domain (messages.KeyCleanup) older than the request.
type cleanupRequest struct {
	domain, writer string
	hlc            messages.HLC
}

// queueCleanups queues for runCleanups the cleanup requests among the
// writes of a peer's op just applied (pks: their parsed keys; a
// remove-domain by the resolved claimant writes its request in a batch,
// with the deletion of its claim and votes), each from the domain's
// resolved claimant as we last evaluated it (before op): the spec has
// only the resolved claimant's remove tell the others to clean up, and
// any other writer's request would let it wipe every peer's claims on a
// domain it does not hold.
func (a *Actor) queueCleanups(op *messages.Op, pks []messages.ParsedKey) {
	if op.Writer == a.st.self {
		return
	}
	ignored, first := 0, ""
	for i, pk := range pks {
		if pk.Kind != messages.KeyCleanup || writeAt(op, i).Delete() {
			continue
		}
		if r := a.results[pk.Domain]; r == nil || r.State.Status != consensus.Resolved || r.State.ResolvedClaimant != op.Writer {
			if ignored++; ignored == 1 {
				first = pk.Domain
			}
			continue
		}
		a.pendingCleanups = append(a.pendingCleanups, cleanupRequest{domain: pk.Domain, writer: op.Writer, hlc: op.HLC})
	}
	if ignored > 0 {
		// One line per op (a batch may carry thousands), the domain cut
		// short: both are the writer's to choose.
		a.d.Log.Warn("ledger: ignoring cleanup from a writer that is not the domain's resolved claimant here", "domain", clip(first, 160), "domains", ignored, "writer", op.Writer)
	}
}

// runCleanups drops the local writer's claim and votes for each domain a
// claimant asked to clean up, when they are older than the request. Only
// the domain's resolved claimant may ask (queueCleanup), and only when
// its request is applied: a request whose commit here fails (a full
// disk) is kept in failedCleanups and run again (ok false), or this
// node's claim would outlive every other peer's and take the removed
// name.
func (a *Actor) runCleanups() (ok bool) {
	ok = true
	reqs := a.pendingCleanups
	a.pendingCleanups = nil
	for _, r := range reqs {
		var ws []write
		if c, ok := a.st.kv[messages.ClaimKey(r.domain, a.st.self)]; ok && !c.Delete() && c.op.HLC.Less(r.hlc) {
			ws = append(ws, write{key: c.Key(), del: true})
		}
		for _, claimant := range a.st.myVotes(r.domain) {
			k := messages.VoteKey(r.domain, a.st.self, claimant)
			if v, ok := a.st.kv[k]; ok && v.op.HLC.Less(r.hlc) {
				ws = append(ws, write{key: k, del: true})
			}
		}
		if len(ws) == 0 {
			continue
		}
		if _, err := a.appendLocal(ws...); err != nil {
			a.d.Log.Error("ledger: cleanup failed", "domain", r.domain, "err", err)
			a.failedCleanups = append(a.failedCleanups, r)
			ok = false
		} else {
			a.d.Log.Info("ledger: cleaned up own entries on request", "domain", r.domain, "by", r.writer)
		}
	}
	return ok
}

// domainChanged marks a domain whose claims, votes or evaluation changed:
// its view entry is built again at the next publish and its listing
// entry at the next read.
func (a *Actor) domainChanged(name string) {
	a.pubChanged[name] = true
	a.list.changed(name)
}

// touch marks a domain for re-evaluation.
func (a *Actor) touch(domains ...string) {
	for _, d := range domains {
		if d != "" {
			a.domainChanged(d)
		}
	}
	a.m.Step(Touch{Domains: domains}, time.Now()) // no output: a round follows

}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
