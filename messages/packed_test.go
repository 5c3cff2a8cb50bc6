package messages

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// The structs with ids as text: the form of frames and ledger files
// written without packing.
type (
	textOp struct {
		Writer string      `cbor:"1,keyasint"`
		Seq    uint64      `cbor:"2,keyasint"`
		HLC    HLC         `cbor:"3,keyasint"`
		Key    string      `cbor:"4,keyasint,omitempty"`
		Value  string      `cbor:"5,keyasint,omitempty"`
		Delete bool        `cbor:"6,keyasint,omitempty"`
		Sig    []byte      `cbor:"7,keyasint,omitempty"`
		Batch  []textWrite `cbor:"8,keyasint,omitempty"`
	}
	textWrite struct {
		Key    string `cbor:"1,keyasint"`
		Value  string `cbor:"2,keyasint,omitempty"`
		Delete bool   `cbor:"3,keyasint,omitempty"`
	}
	textOpID struct {
		Writer string `cbor:"1,keyasint"`
		Seq    uint64 `cbor:"2,keyasint"`
	}
	textHeartbeat struct {
		Writer string `cbor:"1,keyasint"`
		Seq    uint64 `cbor:"2,keyasint"`
		Sig    []byte `cbor:"3,keyasint"`
	}
	textSuspicion struct {
		Writer string `cbor:"1,keyasint"`
		By     string `cbor:"2,keyasint"`
		At     uint64 `cbor:"3,keyasint"`
		Seq    uint64 `cbor:"4,keyasint,omitempty"`
		Sig    []byte `cbor:"5,keyasint"`
	}
)

func textOf(o *Op) textOp {
	t := textOp{Writer: o.Writer, Seq: o.Seq, HLC: o.HLC, Key: o.Key, Value: o.Value, Delete: o.Delete, Sig: o.Sig}
	for _, w := range o.Batch {
		t.Batch = append(t.Batch, textWrite(w))
	}
	return t
}

func idOf(b byte) string { return strings.Repeat(hex.EncodeToString([]byte{b}), 32) }

func sampleOps() []*Op {
	a, b := idOf(0xab), idOf(0x01)
	return []*Op{
		{Writer: a, Seq: 7, HLC: HLC{Wall: 1764316800123, Logical: 2}, Key: VoteKey("example.p2p", a, b), Value: VoteMarker, Sig: bytes.Repeat([]byte{5}, 64)},
		{Writer: a, Seq: 8, HLC: HLC{Wall: 1764316800124}, Key: ClaimKey("example.p2p", a), Value: `{"hash":"hs://x","ssl":false,"clients":[],"services":[]}`},
		{Writer: a, Seq: 9, Key: CleanupKey("example.p2p", a), Delete: true},
		{Writer: b, Seq: 1, Batch: []Write{{Key: VoteKey("a.p2p", b, a), Value: "1"}, {Key: "vote:b.p2p:" + b + ":" + b, Delete: true}, {Key: NetworkKey(b)}}},
		{Writer: b, Seq: 2, Key: WriterKey(a, b), Value: "1"},
		// Not canonical ids: upper case, short, not hex, empty parts.
		{Writer: strings.ToUpper(a), Seq: 3, Key: "vote:x.p2p:" + strings.ToUpper(b) + ":" + a},
		{Writer: "w1", Seq: 4, Key: "claim:x.p2p:w1"},
		{Writer: a[:63] + "g", Seq: 5, Key: ":" + a + "::"},
		{Writer: a, Seq: 6, Key: "a:b:c:d:e:f:g:h:i:" + a}, // more parts than are packed
	}
}

// What a writer signs is the op's CBOR with its ids as text, whatever
// the wire form.
func TestSigningBytesKeepIDsAsText(t *testing.T) {
	for _, op := range sampleOps() {
		got, err := op.SigningBytes()
		if err != nil {
			t.Fatal(err)
		}
		legacy := textOf(op)
		legacy.Sig = nil
		want, err := Marshal(&legacy)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("op %d: signing bytes\n%x\nwant\n%x", op.Seq, got, want)
		}
	}
	// And one pinned: a change to the wire encoding of Op must not reach
	// what its writer signs.
	got, _ := sampleOps()[0].SigningBytes()
	const pinned = "a501784061626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162020703a2011b0000019ac979e47b0202047892766f74653a6578616d706c652e7032703a616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261623a30313031303130313031303130313031303130313031303130313031303130313031303130313031303130313031303130313031303130313031303130313031056131"
	if hex.EncodeToString(got) != pinned {
		t.Fatalf("signing bytes %x, want the pinned %s", got, pinned)
	}
}

func TestPackedOpRoundTripAndOldForm(t *testing.T) {
	for _, op := range sampleOps() {
		b, err := Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		var back Op
		if err := Unmarshal(b, &back); err != nil {
			t.Fatalf("op %d: %v", op.Seq, err)
		}
		if !reflect.DeepEqual(&back, op) {
			t.Fatalf("op %d: round trip gave %+v, want %+v", op.Seq, back, *op)
		}
		old, err := Marshal(textOf(op))
		if err != nil {
			t.Fatal(err)
		}
		var fromOld Op
		if err := Unmarshal(old, &fromOld); err != nil {
			t.Fatalf("op %d in the text form: %v", op.Seq, err)
		}
		if !reflect.DeepEqual(&fromOld, op) {
			t.Fatalf("op %d from the text form: %+v, want %+v", op.Seq, fromOld, *op)
		}
	}
}

func TestPackedIsSmaller(t *testing.T) {
	vote := sampleOps()[0]
	packed, _ := Marshal(vote)
	text, _ := Marshal(textOf(vote))
	// Three ids (writer, voter, claimant) of 64 characters: the writer
	// and the claimant become 32 bytes each, the voter (the writer
	// again) one byte: 129 bytes fewer, less the key array's head.
	if len(text)-len(packed) < 120 {
		t.Fatalf("vote op %d bytes packed, %d as text", len(packed), len(text))
	}
	id := OpID{Writer: idOf(0xab), Seq: 300}
	b, _ := Marshal(id)
	if len(b) > 13 { // array head, 1+8 of short writer, 3 of seq
		t.Fatalf("an announced id is %d bytes", len(b))
	}
}

// randomID is an id no other test of the process uses.
func randomID(t *testing.T) (string, []byte) {
	raw := make([]byte, idBytes)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(raw), raw
}

// shortOpID is the short form of an announced id of writer raw, made by
// hand so that the id is not added to this process's table.
func shortOpID(raw []byte, seq uint64) []byte {
	b := append([]byte{0x82, 0x48}, raw[:shortIDBytes]...)
	return appendHead(b, 0, seq)
}

// An announced id names its writer by 8 bytes: resolved when the writer
// is known here, "" (ignored by the receiver) when it is not, or when two
// known writers share the 8 bytes.
func TestShortIDs(t *testing.T) {
	w, raw := randomID(t)
	var id OpID
	if err := Unmarshal(shortOpID(raw, 9), &id); err != nil || id != (OpID{Seq: 9}) {
		t.Fatalf("an unknown writer decoded to %+v, %v", id, err)
	}
	// Hearing of the writer (any packed id decoded) makes it known.
	var hb Heartbeat
	hbBytes, _ := Marshal(&Heartbeat{Writer: w, Seq: 1, Sig: []byte{1}})
	if err := Unmarshal(hbBytes, &hb); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal(shortOpID(raw, 9), &id); err != nil || id != (OpID{Writer: w, Seq: 9}) {
		t.Fatalf("a known writer decoded to %+v, %v", id, err)
	}
	// Sending an id short makes it known to the sender, so a graft
	// naming it comes back resolvable.
	w2, raw2 := randomID(t)
	b, _ := Marshal(OpID{Writer: w2, Seq: 1})
	if !bytes.Equal(b, shortOpID(raw2, 1)) {
		t.Fatalf("short form % x", b)
	}
	if err := Unmarshal(b, &id); err != nil || id.Writer != w2 {
		t.Fatalf("our own short id decoded to %+v, %v", id, err)
	}
	// A second writer with the same first 8 bytes: neither resolves.
	twin := bytes.Clone(raw)
	twin[31] ^= 1
	internID(twin)
	if err := Unmarshal(shortOpID(raw, 9), &id); err != nil || id.Writer != "" {
		t.Fatalf("a shared short form resolved to %+v, %v", id, err)
	}
	// Bad shapes are refused.
	for name, bad := range map[string][]byte{
		"7 bytes":    append(append([]byte{0x82, 0x47}, raw[:7]...), 1),
		"text":       append(append([]byte{0x82, 0x68}, "abcdefgh"...), 1),
		"3 items":    append(append([]byte{0x83}, shortOpID(raw, 1)[1:]...), 1),
		"no seq":     append([]byte{0x81, 0x48}, raw[:8]...),
		"neg seq":    append(append([]byte{0x82, 0x48}, raw[:8]...), 0x20),
		"trailing":   append(shortOpID(raw, 1), 0),
		"cut writer": {0x82, 0x48, 1, 2},
	} {
		if err := Unmarshal(bad, &id); err == nil {
			t.Errorf("%s: decoded to %+v", name, id)
		}
	}
}

// A signed op goes through a frame and its signature still verifies.
func TestPackedOpVerifies(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	w := hex.EncodeToString(pub)
	op := &Op{Writer: w, Seq: 1, HLC: HLC{Wall: 1}, Key: VoteKey("d.p2p", w, idOf(3)), Value: VoteMarker}
	msg, _ := op.SigningBytes()
	op.Sig = ed25519.Sign(priv, msg)
	b, _ := Marshal(&Envelope{Kind: KindOps, Ops: []*Op{op}})
	var env Envelope
	if err := Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	got, _ := env.Ops[0].SigningBytes()
	if !ed25519.Verify(pub, got, env.Ops[0].Sig) {
		t.Fatal("the signature does not verify after a frame")
	}
	// A key altered on the wire (another claimant) is another message.
	env.Ops[0].Key = VoteKey("d.p2p", w, idOf(4))
	got, _ = env.Ops[0].SigningBytes()
	if ed25519.Verify(pub, got, env.Ops[0].Sig) {
		t.Fatal("an altered key verified")
	}
}

func TestPackedOverlayAndVectorOldForm(t *testing.T) {
	a, b := idOf(0xab), idOf(0x02)
	old, _ := Marshal(map[int]any{1: KindIHave, 40: map[int]any{
		2: []textHeartbeat{{Writer: a, Seq: 9, Sig: []byte{1}}},
		3: []textOpID{{Writer: a, Seq: 3}, {Writer: "W", Seq: 4}},
		5: []textSuspicion{{Writer: a, By: b, At: 5, Sig: []byte{2}}},
	}, 5: map[string]uint64{a: 3, b: 4, "x": 1}})
	var env Envelope
	if err := Unmarshal(old, &env); err != nil {
		t.Fatal(err)
	}
	want := &Envelope{Kind: KindIHave, VV: VersionVector{a: 3, b: 4, "x": 1}, Overlay: &Overlay{
		Heartbeats: []*Heartbeat{{Writer: a, Seq: 9, Sig: []byte{1}}},
		IDs:        []OpID{{Writer: a, Seq: 3}, {Writer: "W", Seq: 4}},
		Suspicions: []*Suspicion{{Writer: a, By: b, At: 5, Sig: []byte{2}}},
	}}
	if !reflect.DeepEqual(&env, want) {
		t.Fatalf("text form decoded to %+v", env)
	}
	packed, _ := Marshal(&env)
	if len(packed) >= len(old) {
		t.Fatalf("packed %d bytes, text %d", len(packed), len(old))
	}
	var back Envelope
	if err := Unmarshal(packed, &back); err != nil || !reflect.DeepEqual(&back, want) {
		t.Fatalf("packed round trip: %+v, %v", back, err)
	}
	// A vector is deterministic: the same map, the same bytes.
	again, _ := Marshal(&Envelope{Kind: KindIHave, VV: VersionVector{"x": 1, b: 4, a: 3}, Overlay: want.Overlay})
	if !bytes.Equal(again, packed) {
		t.Fatal("a vector encodes two ways")
	}
}

func TestPackedRefusesBadIDs(t *testing.T) {
	a := idOf(0xab)
	raw, _ := hex.DecodeString(a)
	for name, b := range map[string][]byte{
		"short byte id":          mustMarshal(t, map[int]any{1: raw[:31], 2: 1}),
		"number as id":           mustMarshal(t, map[int]any{1: 5, 2: 1}),
		"key of no parts":        mustMarshal(t, map[int]any{1: raw, 2: 1, 4: []any{}}),
		"key of 9 parts":         mustMarshal(t, map[int]any{1: raw, 2: 1, 4: []any{"a", "b", "c", "d", "e", "f", "g", "h", raw}}),
		"key part number":        mustMarshal(t, map[int]any{1: raw, 2: 1, 4: []any{"vote", 7}}),
		"key part nesting":       mustMarshal(t, map[int]any{1: raw, 2: 1, 4: []any{"vote", []any{raw}}}),
		"writer part, no writer": mustMarshal(t, map[int]any{2: 1, 4: []any{"vote", "d.p2p", []byte{}, raw}}),
		"batch write, no key":    mustMarshal(t, map[int]any{1: raw, 2: 1, 8: []any{map[int]any{2: "1"}}}),
	} {
		var op Op
		if err := Unmarshal(b, &op); err == nil {
			t.Errorf("%s: decoded to %+v", name, op)
		}
	}
	// One writer both packed and as text in one vector.
	hand := append([]byte{0xa2}, appendID(nil, a)...)
	hand = append(hand, 0x01)
	hand = appendText(hand, a)
	hand = append(hand, 0x02)
	var vv VersionVector
	if err := Unmarshal(hand, &vv); err == nil {
		t.Fatalf("a writer named twice decoded to %v", vv)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzPackedOp decodes arbitrary bytes as an op: it must never panic, and
// whatever decodes must encode again and decode to the same op with the
// same signing bytes.
func FuzzPackedOp(f *testing.F) {
	for _, op := range sampleOps() {
		b, _ := Marshal(op)
		f.Add(b)
		f.Add(op.appendCBOR(nil, formShort))
		old, _ := Marshal(textOf(op))
		f.Add(old)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var op Op
		if Unmarshal(b, &op) != nil || op.Unresolved {
			return // an unresolved op is dropped by its receiver, never encoded
		}
		again, err := Marshal(&op)
		if err != nil {
			t.Fatalf("Marshal of a decoded op: %v", err)
		}
		var back Op
		if err := Unmarshal(again, &back); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(&back, &op) {
			t.Fatalf("round trip changed %+v into %+v", op, back)
		}
		s1, e1 := op.SigningBytes()
		s2, e2 := back.SigningBytes()
		if e1 != nil || e2 != nil || !bytes.Equal(s1, s2) {
			t.Fatalf("signing bytes differ after a round trip: %v %v", e1, e2)
		}
		// Written by hand, they are what the codec writes for the plain
		// struct with ids as text.
		legacy := textOf(&op)
		legacy.Sig = nil
		if want, err := Marshal(&legacy); err != nil || !bytes.Equal(s1, want) {
			t.Fatalf("signing bytes % x, the codec's % x (%v)", s1, want, err)
		}
	})
}

// BenchmarkOpsFrame encodes and decodes a frame of 16 vote ops, packed
// (the wire form) and, for comparison, with ids as text.
func BenchmarkOpsFrame(b *testing.B) {
	ops := make([]*Op, 16)
	texts := make([]textOp, 16)
	for i := range ops {
		w := idOf(byte(i))
		ops[i] = &Op{Writer: w, Seq: uint64(100 + i), HLC: HLC{Wall: 1764316800123}, Key: VoteKey("example.p2p", w, idOf(0xee)), Value: VoteMarker, Sig: bytes.Repeat([]byte{5}, 64)}
		texts[i] = textOf(ops[i])
	}
	b.Run("packed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ := Marshal(&Envelope{Kind: KindOps, Ops: ops})
			var env Envelope
			if err := Unmarshal(buf, &env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ := Marshal(map[int]any{1: KindOps, 6: texts})
			var env struct {
				Kind string   `cbor:"1,keyasint"`
				Ops  []textOp `cbor:"6,keyasint"`
			}
			if err := Unmarshal(buf, &env); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An empty vector is left out of a frame: no field at all, not a null
// or an empty map.
func TestEmptyVectorLeftOut(t *testing.T) {
	for _, vv := range []VersionVector{nil, {}} {
		b := mustMarshal(t, &Envelope{Kind: KindVV, VV: vv})
		if want := mustMarshal(t, map[int]string{1: KindVV}); !bytes.Equal(b, want) {
			t.Fatalf("vector %#v: frame %x, want %x", vv, b, want)
		}
	}
}

// The intern table stays bounded however many distinct ids arrive, and
// an id decoded after it was emptied is still the right string.
func TestInternBounded(t *testing.T) {
	var raw [idBytes]byte
	for i := range maxInterned + 10 {
		raw[0], raw[1], raw[2] = byte(i), byte(i>>8), byte(i>>16)
		if got, want := internID(raw[:]), hex.EncodeToString(raw[:]); got != want {
			t.Fatalf("id %d decoded to %s, want %s", i, got, want)
		}
	}
	interned.RLock()
	n := len(interned.m)
	interned.RUnlock()
	if n > maxInterned {
		t.Fatalf("%d ids interned, at most %d", n, maxInterned)
	}
}

// A pinned id (a node's own) resolves from its short form in a process
// that never decoded it, and after the table was emptied; an id that was
// only interned by the sender does not.
func TestPinnedClaimant(t *testing.T) {
	self, _ := randomID(t)
	other, _ := randomID(t)
	Pin(self)
	Pin("not an id") // ignored
	voter, _ := randomID(t)
	votes := make([][]byte, 2)
	for i, claimant := range []string{self, other} {
		votes[i] = (&Op{Writer: voter, Seq: 1, HLC: HLC{Wall: 1}, Key: VoteKey("d.p2p", voter, claimant), Value: VoteMarker}).appendCBOR(nil, formShort)
	}
	// Fill the table past its bound: it is emptied, as a receiver's
	// table is that never saw these ids.
	var raw [idBytes]byte
	raw[31] = 0xff
	for i := range maxInterned + 1 {
		raw[0], raw[1], raw[2] = byte(i), byte(i>>8), byte(i>>16)
		internID(raw[:])
	}
	var got Op
	if err := Unmarshal(votes[0], &got); err != nil || got.Unresolved || got.Key != VoteKey("d.p2p", voter, self) {
		t.Fatalf("a vote for the pinned claimant decoded to %+v, %v", got, err)
	}
	if err := Unmarshal(votes[1], &got); err != nil || !got.Unresolved {
		t.Fatalf("a vote for a claimant the table lost decoded to %+v, %v", got, err)
	}
}

// A live push names a vote's claimant by 8 bytes: the op decodes whole
// where the claimant is known, and marked Unresolved (with no error: the
// frame's other ops are good) where it is not. Other keys keep their ids
// whole, and the op's signature does not depend on the form.
func TestShortClaimant(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	w := hex.EncodeToString(pub)
	claimant, _ := randomID(t)
	op := &Op{Writer: w, Seq: 3, HLC: HLC{Wall: 1}, Key: VoteKey("d.p2p", w, claimant), Value: VoteMarker}
	msg, _ := op.SigningBytes()
	op.Sig = ed25519.Sign(priv, msg)
	whole, _ := Marshal(op)
	b := op.appendCBOR(nil, formShort)
	if len(whole)-len(b) != (2+idBytes)-(1+shortIDBytes) {
		t.Fatalf("vote op %d bytes live, %d whole", len(b), len(whole))
	}
	var got Op
	if err := Unmarshal(b, &got); err != nil || got.Unresolved || got.Key != op.Key {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if m, _ := got.SigningBytes(); !ed25519.Verify(pub, m, got.Sig) {
		t.Fatal("the signature does not verify after a short claimant")
	}
	// Another claimant's 8 bytes, of no writer this process knows.
	i := bytes.Index(b, append([]byte{0x48}, mustHex(t, claimant)[:8]...))
	if i < 0 {
		t.Fatalf("no short claimant in % x", b)
	}
	other := bytes.Clone(b)
	_, raw := randomID(t)
	copy(other[i+1:i+9], raw)
	if err := Unmarshal(other, &got); err != nil || !got.Unresolved {
		t.Fatalf("an unknown claimant decoded to %+v, %v", got, err)
	}
	// A frame of it and a good op decodes, the bad one marked.
	env, _ := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: []*Op{op, op}, ShortIDs: true})
	j := bytes.Index(env, b)
	copy(env[j+i+1:j+i+9], raw)
	var e Envelope
	if err := Unmarshal(env, &e); err != nil || !e.Ops[0].Unresolved || e.Ops[1].Unresolved {
		t.Fatalf("frame decoded to %+v, %v", e.Ops, err)
	}
	// Only vote keys go short.
	claim := &Op{Writer: w, Seq: 4, Key: "member:" + claimant, Value: "1"}
	b = claim.appendCBOR(nil, formShort)
	if !bytes.Contains(b, mustHex(t, claimant)) {
		t.Fatalf("a member key went short: % x", b)
	}
}

func mustHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkSigningBytes: a vote op's signing bytes by hand and, for
// comparison, through the codec's reflection over the plain struct.
func BenchmarkSigningBytes(b *testing.B) {
	op := sampleOps()[0]
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			legacy := textOf(op)
			legacy.Sig = nil
			if _, err := Marshal(&legacy); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := op.SigningBytes(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
