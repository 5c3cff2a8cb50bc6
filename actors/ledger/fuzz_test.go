package ledger

import (
	"fmt"
	"testing"

	"peerdns/messages"
	"peerdns/transport/identity"
)

// signedOp is a valid op by id, encoded.
func signedOp(t testing.TB, id *identity.Identity, seq uint64, key, value string) []byte {
	op := &messages.Op{Writer: id.ID(), Seq: seq, HLC: messages.HLC{Wall: 1000, Logical: 1}, Key: key, Value: value}
	b, err := op.SigningBytes()
	if err != nil {
		t.Fatal(err)
	}
	op.Sig = id.Sign(b)
	enc, err := messages.Marshal(op)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// FuzzOpDecodeVerify feeds arbitrary bytes to the op decoder and the
// verifier: nothing may panic, and an op is only accepted when it is the
// exact, correctly signed op of an authorised writer.
func FuzzOpDecodeVerify(f *testing.F) {
	seed := make([]byte, 32)
	id, err := identity.FromSeed(seed)
	if err != nil {
		f.Fatal(err)
	}
	valid := signedOp(f, id, 1, messages.ClaimKey("a.p2p", id.ID()), `{"hash":"`+hashA+`"}`)
	f.Add(valid)
	f.Add(signedOp(f, id, 1, messages.VoteKey("a.p2p", id.ID(), id.ID()), "1"))
	f.Add(signedOp(f, id, 2, messages.ClaimKey("a.p2p", id.ID()), "x"))
	f.Add(signedOp(f, id, 1, "claim:a.p2p:someoneelse", "x"))
	f.Add([]byte{})
	f.Add([]byte{0xa0})
	f.Add([]byte{0xff, 0xff, 0xff})
	for i := range valid {
		if i%7 == 0 {
			c := append([]byte(nil), valid...)
			c[i] ^= 0x55
			f.Add(c)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var op messages.Op
		if err := messages.Unmarshal(data, &op); err != nil {
			return
		}
		s := newState(id.ID())
		s.writers[id.ID()] = true
		pks, err := s.verify(&op)
		if err != nil {
			return
		}
		// Accepted: it must really be signed by its writer, for its own keys.
		msg, _ := op.SigningBytes()
		if !messages.VerifyPeer(op.Writer, msg, op.Sig) || len(pks) != op.NumWrites() || op.Seq != 1 {
			t.Fatalf("accepted an invalid op: %+v", op)
		}
		for _, pk := range pks {
			if pk.Writer != op.Writer {
				t.Fatalf("accepted a write of another writer's key: %+v", op)
			}
		}
		s.apply(&op, pks)
		if _, err := s.verify(&op); err == nil {
			t.Fatal("the same op verified twice")
		}
	})
}

func TestStateOrdering(t *testing.T) {
	a, _ := identity.Generate()
	s := newState(a.ID())
	s.writers[a.ID()] = true
	mk := func(seq uint64) *messages.Op {
		var op messages.Op
		if err := messages.Unmarshal(signedOp(t, a, seq, messages.ClaimKey("x.p2p", a.ID()), `{"hash":"`+hashA+`"}`), &op); err != nil {
			t.Fatal(err)
		}
		return &op
	}
	if _, err := s.verify(mk(2)); err != errGap {
		t.Fatalf("verify seq 2 first = %v, want gap", err)
	}
	op1 := mk(1)
	pk, err := s.verify(op1)
	if err != nil {
		t.Fatal(err)
	}
	s.apply(op1, pk)
	if _, err := s.verify(op1); err != errDuplicate {
		t.Fatalf("verify again = %v, want duplicate", err)
	}
	if got := s.opsSince(messages.VersionVector{}, 0, nil); len(got) != 1 {
		t.Fatalf("opsSince(empty) = %d ops", len(got))
	}
	if got := s.opsSince(messages.VersionVector{a.ID(): 1}, 0, nil); len(got) != 0 {
		t.Fatalf("opsSince(have all) = %d ops", len(got))
	}
}

// opsSince with Only answers those writers' ops alone (a graft's
// answer), from the vector's seq on, and every writer's without it.
func TestOpsSinceOnly(t *testing.T) {
	a, _ := identity.Generate()
	b, _ := identity.Generate()
	s := newState(a.ID())
	s.writers[a.ID()], s.writers[b.ID()] = true, true
	for _, id := range []*identity.Identity{a, b} {
		for seq := uint64(1); seq <= 3; seq++ {
			var op messages.Op
			if err := messages.Unmarshal(signedOp(t, id, seq, messages.ClaimKey(fmt.Sprintf("d%d.p2p", seq), id.ID()), `{"hash":"`+hashA+`"}`), &op); err != nil {
				t.Fatal(err)
			}
			pk, err := s.verify(&op)
			if err != nil {
				t.Fatal(err)
			}
			s.apply(&op, pk)
		}
	}
	vv := messages.VersionVector{a.ID(): 1}
	if got := s.opsSince(vv, 0, nil); len(got) != 5 {
		t.Fatalf("every writer from the vector: %d ops, want 5", len(got))
	}
	got := s.opsSince(vv, 0, map[string]bool{a.ID(): true})
	if len(got) != 2 || got[0].Writer != a.ID() || got[0].Seq != 2 || got[1].Seq != 3 {
		t.Fatalf("only the grafted writer: %+v", got)
	}
	if got := s.opsSince(vv, 0, map[string]bool{}); len(got) != 0 {
		t.Fatalf("an empty Only: %d ops, want none", len(got))
	}
}
