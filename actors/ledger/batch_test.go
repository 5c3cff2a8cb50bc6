package ledger

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/http/httpx"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// sign signs op in place.
func sign(t testing.TB, id *identity.Identity, op *messages.Op) *messages.Op {
	t.Helper()
	op.Writer = id.ID()
	b, err := op.SigningBytes()
	if err != nil {
		t.Fatal(err)
	}
	op.Sig = id.Sign(b)
	return op
}

// A batched op applies every write (one entry per key, every domain
// touched); single-key and batched ops of one writer interleave and
// last-writer-wins holds per key across them.
func TestBatchAppliesPerKey(t *testing.T) {
	id, _ := identity.Generate()
	s := newState(id.ID())
	s.writers[id.ID()] = true
	w := id.ID()
	batch := sign(t, id, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: 10}, Batch: []messages.Write{
		{Key: messages.ClaimKey("a.p2p", w), Value: `{"hash":"` + hashA + `"}`},
		{Key: messages.ClaimKey("b.p2p", w), Value: `{"hash":"` + hashA + `"}`},
		{Key: messages.VoteKey("a.p2p", w, w), Value: "1"},
	}})
	pks, err := s.verify(batch)
	if err != nil || len(pks) != 3 {
		t.Fatalf("verify: %v %v", pks, err)
	}
	touched := s.apply(batch, pks)
	if strings.Join(touched, ",") != "a.p2p,b.p2p,a.p2p" || len(s.kv) != 3 || s.vv[w] != 1 || s.length != 1 {
		t.Fatalf("touched %v, kv %d, vv %d, ops %d", touched, len(s.kv), s.vv[w], s.length)
	}
	if s.domains["a.p2p"] == nil || len(s.domains["a.p2p"].claims) != 1 || len(s.domains["a.p2p"].votes) != 1 {
		t.Fatalf("index of a.p2p: %+v", s.domains["a.p2p"])
	}
	// A later single-key op replaces one key; the rest stay.
	single := sign(t, id, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: 20}, Key: messages.ClaimKey("b.p2p", w), Delete: true})
	pks, err = s.verify(single)
	if err != nil {
		t.Fatal(err)
	}
	s.apply(single, pks)
	if !s.kv[messages.ClaimKey("b.p2p", w)].Delete() || s.kv[messages.ClaimKey("a.p2p", w)].Delete() {
		t.Fatal("last writer did not win per key")
	}
	// The log keeps the ops as signed, for replication.
	if got := s.opsSince(messages.VersionVector{}, 0, nil); len(got) != 2 || len(got[0].Batch) != 3 || got[1].Key == "" {
		t.Fatalf("opsSince: %+v", got)
	}
}

// Batches that are wrong anywhere are refused whole.
func TestBatchRefusedWhole(t *testing.T) {
	id, _ := identity.Generate()
	other, _ := identity.Generate()
	w := id.ID()
	claim := func(d, by string) messages.Write {
		return messages.Write{Key: messages.ClaimKey(d, by), Value: `{"hash":"` + hashA + `"}`}
	}
	tampered := sign(t, id, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: 1}, Batch: []messages.Write{claim("a.p2p", w), claim("b.p2p", w)}})
	tampered.Batch[1].Key = messages.ClaimKey("c.p2p", w)
	huge := make([]messages.Write, messages.MaxBatch+1)
	for i := range huge {
		huge[i] = messages.Write{Key: messages.VoteKey("x.p2p", w, string(rune('a'+i%26))+strings.Repeat("f", i%7)), Value: "1"}
	}
	big := []messages.Write{{Key: messages.ClaimKey("big.p2p", w), Value: strings.Repeat("x", messages.MaxBatchBytes)}, claim("y.p2p", w)}
	for name, tc := range map[string]struct {
		op   *messages.Op
		want error
	}{
		"other writer's key": {sign(t, id, &messages.Op{Seq: 1, Batch: []messages.Write{claim("a.p2p", w), claim("b.p2p", other.ID())}}), errKeyOwner},
		"covers other keys":  {tampered, errBadSig},
		"key twice":          {sign(t, id, &messages.Op{Seq: 1, Batch: []messages.Write{claim("a.p2p", w), claim("a.p2p", w)}}), errBadBatch},
		"key and batch":      {sign(t, id, &messages.Op{Seq: 1, Key: messages.ClaimKey("z.p2p", w), Batch: []messages.Write{claim("a.p2p", w)}}), errBadBatch},
		"too many writes":    {sign(t, id, &messages.Op{Seq: 1, Batch: huge}), errBadBatch},
		"too many bytes":     {sign(t, id, &messages.Op{Seq: 1, Batch: big}), errBadBatch},
		"gap":                {sign(t, id, &messages.Op{Seq: 3, Batch: []messages.Write{claim("a.p2p", w), claim("b.p2p", w)}}), errGap},
		"malformed key":      {sign(t, id, &messages.Op{Seq: 1, Batch: []messages.Write{claim("a.p2p", w), {Key: "claim:nope"}}}), messages.ErrBadKey},
	} {
		t.Run(name, func(t *testing.T) {
			s := newState(w)
			s.writers[w] = true
			if _, err := s.verify(tc.op); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(s.kv) != 0 || s.vv[w] != 0 {
				t.Fatal("something was applied")
			}
		})
	}
	// A replayed batch is a duplicate, not applied twice.
	s := newState(w)
	s.writers[w] = true
	ok := sign(t, id, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: 5}, Batch: []messages.Write{claim("a.p2p", w), claim("b.p2p", w)}})
	pks, err := s.verify(ok)
	if err != nil {
		t.Fatal(err)
	}
	s.apply(ok, pks)
	if _, err := s.verify(ok); !errors.Is(err, errDuplicate) {
		t.Fatalf("replay: %v", err)
	}
}

// Local bursts become batches of bounded size; a key written twice in a
// burst keeps its last value.
func TestBatchesSplit(t *testing.T) {
	var ws []write
	for i := 0; i < messages.MaxBatch+10; i++ {
		ws = append(ws, write{key: fmt.Sprintf("k%d", i), value: "v"})
	}
	ws = append(ws, write{key: ws[0].key, value: "last"})
	got := batches(ws)
	if len(got) != 2 || len(got[0]) != messages.MaxBatch || len(got[1]) != 10 {
		t.Fatalf("split %d ops: %d, %d", len(got), len(got[0]), len(got[len(got)-1]))
	}
	if got[1][9].value != "last" {
		t.Fatalf("the later write of a key must win: %+v", got[1][9])
	}
	big := []write{{key: "a", value: strings.Repeat("x", messages.MaxBatchBytes-10)}, {key: "b", value: "y"}}
	if got := batches(big); len(got) != 2 {
		t.Fatalf("byte bound: %d ops", len(got))
	}
}

// An op a session skimmed as held (messages.Op.Held: its writer, seq and
// clock decoded, nothing else) is a duplicate when the ledger has it and
// otherwise a gap: never applied, never refused.
func TestHeldOpsNeverApplied(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	peer, _ := identity.Generate()
	if r := ask[*messages.AddWriterReply](t, l, &messages.AddWriter{ID: peer.ID()}); r.Err != nil {
		t.Fatal(r.Err)
	}
	held := &messages.Op{Writer: peer.ID(), Seq: 1, HLC: messages.HLC{Wall: 1}, Held: true}
	apply := func(op *messages.Op) *messages.ApplyOpsReply {
		t.Helper()
		return ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}})
	}
	if r := apply(held); r.Applied != 0 || r.Rejected != 0 || r.Gaps != 1 {
		t.Fatalf("a held op the ledger lacks: %+v, want a gap", r)
	}
	whole := sign(t, peer, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: 1}, Key: messages.ClaimKey("held.p2p", peer.ID()), Value: `{"hash":"` + hashA + `"}`})
	if r := apply(whole); r.Applied != 1 {
		t.Fatalf("the op whole: %+v", r)
	}
	if r := apply(held); r.Duplicates != 1 {
		t.Fatalf("a held op the ledger has: %+v, want a duplicate", r)
	}
}

// A peer's ops may come in any order, and the ledger applies what it can
// of them until nothing more applies. A writer's ops sent in reverse
// seq order must not make that a pass over the whole batch for every
// op: one frame of a few thousand ops would hold the ledger actor (and
// every peer's ops and every request behind it) for a minute.
func TestOpsInReverseOrderApplyInOnePass(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	peers, _ := addConnectedWriters(t, l, 1)
	p := peers[0]
	const n = 8000 // about what one 1 MiB frame carries
	now := time.Now().UnixMilli()
	// Keys that touch no domain (a name that is not canonical is kept
	// in the log and nothing else), so only applying them costs.
	key := messages.ClaimKey("NOT-CANONICAL", p.ID())
	ops := make([]*messages.Op, n)
	for i := range ops {
		ops[n-1-i] = sign(t, p, &messages.Op{Seq: uint64(i + 1), HLC: messages.HLC{Wall: now + int64(i)}, Key: key, Value: "1"})
		ops[n-1-i].SigChecked = true // as the peer session marks them
	}
	start := time.Now()
	rep, err := httpx.Ask[*messages.ApplyOpsReply](l.sys.Root, l.pid, &messages.ApplyOps{From: "test", Ops: ops}, 5*time.Second)
	if err != nil {
		t.Fatalf("%d ops in reverse order: no answer after %v: %v", n, time.Since(start), err)
	}
	if rep.Applied != n {
		t.Fatalf("apply: %+v, want %d applied", rep, n)
	}
}
