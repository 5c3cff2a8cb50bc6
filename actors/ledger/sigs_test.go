package ledger

import (
	"testing"

	"peerdns/messages"
	"peerdns/transport/identity"
)

// checkSigs marks exactly the ops whose signatures verify, whether it
// spreads them over workers or checks a few on the caller's goroutine;
// a forged op stays unmarked and state.verify refuses it.
func TestCheckSigsMarksOnlyValidOps(t *testing.T) {
	id, _ := identity.Generate()
	for _, n := range []int{3, 4*minSigsPerWorker + 7} {
		ops := make([]*messages.Op, n)
		for i := range ops {
			op := &messages.Op{Writer: id.ID(), Seq: uint64(i + 1), Key: messages.ClaimKey("d"+itoa(i)+".p2p", id.ID()), Value: `{"hash":"` + hashA + `"}`}
			msg, _ := op.SigningBytes()
			op.Sig = id.Sign(msg)
			ops[i] = op
		}
		forged := map[int]bool{0: true, n / 2: true, n - 1: true}
		for i := range forged {
			ops[i].Value = `{"hash":"` + hashB + `"}` // signed over another value
		}
		checkSigs(ops)
		for i, op := range ops {
			if op.SigChecked == forged[i] {
				t.Fatalf("%d ops: op %d marked %v, forged %v", n, i, op.SigChecked, forged[i])
			}
		}
		s := newState(id.ID())
		s.writers[id.ID()] = true
		if _, err := s.verify(ops[0]); err == nil {
			t.Fatalf("%d ops: a forged op passed verify", n)
		}
	}
}
