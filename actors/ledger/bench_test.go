package ledger

import (
	"testing"

	"peerdns/messages"
	"peerdns/transport/identity"
)

// BenchmarkSignApply: sign an op, then verify and apply it to the ledger
// state (what a local write costs without the fsync).
func BenchmarkSignApply(b *testing.B) {
	id, _ := identity.Generate()
	s := newState(id.ID())
	s.writers[id.ID()] = true
	val := `{"hash":"` + hashA + `"}`
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = messages.ClaimKey("d"+itoa(i)+".p2p", id.ID())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op := &messages.Op{Writer: id.ID(), Seq: uint64(i + 1), HLC: messages.HLC{Wall: int64(i)}, Key: keys[i%len(keys)], Value: val}
		msg, _ := op.SigningBytes()
		op.Sig = id.Sign(msg)
		pk, err := s.verify(op)
		if err != nil {
			b.Fatal(err)
		}
		s.apply(op, pk)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
