package messages

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
)

// An ops frame written by hand is byte for byte what the codec writes;
// any other frame, and an ops frame with anything beside its ops, goes
// through the codec.
func TestMarshalEnvelopeMatchesCodec(t *testing.T) {
	ops := sampleOps()
	same := func(e *Envelope) {
		t.Helper()
		want, werr := Marshal(e)
		got, gerr := MarshalEnvelope(e)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s frame: by hand % x (%v), codec % x (%v)", e.Kind, got, gerr, want, werr)
		}
	}
	for n := 1; n <= len(ops); n++ {
		same(&Envelope{Kind: KindOps, Ops: ops[:n]})
	}
	for _, e := range overlayFrames() {
		if !e.overlayOnly() {
			t.Fatalf("%s frame %+v: not written by hand", e.Kind, e.Overlay)
		}
		same(e)
	}
	same(&Envelope{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{{Writer: idOf(1), Seq: 1}, nil}}})
	same(&Envelope{Kind: KindLeave, Overlay: &Overlay{Sample: []PeerInfo{{ID: idOf(2)}}}})
	same(&Envelope{Kind: KindOps, Ops: []*Op{ops[0], nil}})
	same(&Envelope{Kind: KindOps})
	same(&Envelope{Kind: KindPing, Ping: &Ping{SentUnixNano: 1}})
	// Every other field set beside the ops (a frame Validate refuses,
	// but the encoder must not drop the field): the codec writes it.
	v := reflect.ValueOf(&Envelope{}).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Name == "Kind" || f.Name == "Ops" || f.Tag.Get("cbor") == "-" {
			continue
		}
		e := &Envelope{Kind: KindOps, Ops: ops}
		fv := reflect.ValueOf(e).Elem().Field(i)
		switch fv.Kind() {
		case reflect.Pointer:
			fv.Set(reflect.New(fv.Type().Elem()))
		case reflect.Slice:
			fv.Set(reflect.MakeSlice(fv.Type(), 1, 1))
		case reflect.Map:
			fv.Set(reflect.MakeMap(fv.Type()))
			fv.SetMapIndex(reflect.ValueOf(idOf(1)), reflect.ValueOf(uint64(1)))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", f.Name, fv.Kind())
		}
		same(e)
	}
}

// A live frame names vote claimants short and decodes to the same ops
// (signatures verify: the signing bytes hold the whole key).
func TestMarshalEnvelopeShortIDs(t *testing.T) {
	ops := sampleOps()
	whole, _ := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: ops})
	live, err := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: ops, ShortIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(live) >= len(whole) {
		t.Fatalf("live frame %d bytes, whole %d", len(live), len(whole))
	}
	var e Envelope
	if err := Unmarshal(live, &e); err != nil {
		t.Fatal(err)
	}
	for i, o := range e.Ops {
		want, _ := ops[i].SigningBytes()
		got, _ := o.SigningBytes()
		if o.Unresolved || !bytes.Equal(got, want) {
			t.Fatalf("op %d decoded to %+v", i, o)
		}
	}
}

func BenchmarkMarshalOpsFrame(b *testing.B) {
	ops := make([]*Op, 0, 16)
	for len(ops) < 16 {
		ops = append(ops, sampleOps()...)
	}
	e := &Envelope{Kind: KindOps, Ops: ops[:16]} // whole ids: the same bytes both ways
	benchEncoders(b, e)
}

// codecEnvelope decodes b with the codec alone.
func codecEnvelope(b []byte) (*Envelope, error) {
	var e Envelope
	if err := Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Ops frames read by hand decode to what the codec decodes, short ids
// and all; other frames and ops frames of another shape go to the codec.
func TestUnmarshalEnvelopeMatchesCodec(t *testing.T) {
	ops := sampleOps()
	frames := [][]byte{}
	for n := 1; n <= len(ops); n++ {
		for _, short := range []bool{false, true} {
			b, err := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: ops[:n], ShortIDs: short})
			if err != nil {
				t.Fatal(err)
			}
			if unmarshalOpsFrame(b, nil) == nil {
				t.Fatalf("%d ops (short %v): not read by hand", n, short)
			}
			frames = append(frames, b)
		}
	}
	for _, e := range overlayFrames() {
		b, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if unmarshalOverlayFrame(b) == nil {
			t.Fatalf("%s frame %+v: not read by hand", e.Kind, e.Overlay)
		}
		frames = append(frames, b)
	}
	ping, _ := Marshal(&Envelope{Kind: KindPing, Ping: &Ping{SentUnixNano: 1}})
	withVV, _ := Marshal(&Envelope{Kind: KindOps, Ops: ops[:2], VV: VersionVector{idOf(1): 3}})
	leave, _ := Marshal(&Envelope{Kind: KindLeave, Overlay: &Overlay{Sample: []PeerInfo{{ID: idOf(2)}}}})
	frames = append(frames, ping, withVV, leave)
	for i, b := range frames {
		got, gerr := UnmarshalEnvelope(b)
		want, werr := codecEnvelope(b)
		if gerr != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("frame %d: by hand %+v (%v), codec %+v (%v)", i, got, gerr, want, werr)
		}
	}
	for _, i := range []int{len(frames) - 3, len(frames) - 2, len(frames) - 1} {
		if unmarshalOpsFrame(frames[i], nil) != nil || unmarshalOverlayFrame(frames[i]) != nil {
			t.Fatalf("frame %d read by hand, want the codec", i)
		}
	}
	// Broken ops frames: the codec's error, never a partial frame.
	good := frames[5]
	for name, b := range map[string][]byte{
		"cut":        good[:len(good)-1],
		"trailing":   append(append([]byte{}, good...), 0),
		"count lies": append(append(append([]byte{}, opsFramePrefix...), 0x19, 0xff, 0xff), good[len(opsFramePrefix)+1:]...),
		"no ops":     append(append([]byte{}, opsFramePrefix...), 0x80),
	} {
		got, gerr := UnmarshalEnvelope(b)
		_, werr := codecEnvelope(b)
		if (gerr == nil) != (werr == nil) || (gerr != nil && got != nil) {
			t.Fatalf("%s: by hand %+v (%v), codec error %v", name, got, gerr, werr)
		}
	}
}

// emptyInterned empties the table of decoded ids, as filling it does: a
// short id resolves against the ids decoded before it, so two decodings
// of one frame agree only from the same table.
func emptyInterned() {
	interned.Lock()
	defer interned.Unlock()
	clear(interned.m)
	clear(interned.byShort)
	for pk, ps := range interned.pinned {
		putInterned(pk, ps)
	}
}

// Whatever the bytes, UnmarshalEnvelope agrees with the codec: both
// refuse, or both decode to the same frame.
func FuzzUnmarshalEnvelope(f *testing.F) {
	ops := sampleOps()
	for n := 1; n <= len(ops); n += 3 {
		b, _ := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: ops[:n], ShortIDs: n%2 == 0})
		f.Add(b)
	}
	ping, _ := Marshal(&Envelope{Kind: KindPing, Ping: &Ping{SentUnixNano: 1}})
	f.Add(ping)
	for _, e := range overlayFrames() {
		b, _ := Marshal(e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		emptyInterned()
		got, gerr := UnmarshalEnvelope(b)
		emptyInterned()
		want, werr := codecEnvelope(b)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("by hand error %v, codec error %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("by hand %+v, codec %+v", got, want)
		}
		// Whatever decodes encodes by hand as the codec encodes it.
		if gerr == nil {
			hand, herr := MarshalEnvelope(got)
			codec, cerr := Marshal(got)
			if (herr == nil) != (cerr == nil) || !bytes.Equal(hand, codec) {
				t.Fatalf("encoded by hand % x (%v), by the codec % x (%v)", hand, herr, codec, cerr)
			}
		}
		// Holding the ops of odd seq: what the codec decodes decodes with
		// those skimmed; what it refuses is taken only for a held op.
		emptyInterned()
		skim, serr := UnmarshalEnvelopeHeld(b, oddHeld)
		if werr == nil {
			if serr != nil {
				t.Fatalf("the codec decodes it, with held ops: %v", serr)
			}
			checkHeld(t, skim, want)
		} else if serr == nil && !slices.ContainsFunc(skim.Ops, func(o *Op) bool { return o != nil && o.Held }) {
			t.Fatalf("the codec refuses it (%v), taken with no op held: %+v", werr, skim)
		}
	})
}

// oddHeld holds the ops of odd seq.
func oddHeld(_ string, seq uint64) bool { return seq%2 == 1 }

// checkHeld compares a frame decoded with oddHeld to the codec's: a held
// op is one oddHeld holds and keeps its writer, seq and clock and
// nothing else; any other op is the codec's (a frame or an op of
// another shape than the encoder's is read whole).
func checkHeld(t *testing.T, got, want *Envelope) {
	t.Helper()
	if got.Kind != want.Kind || len(got.Ops) != len(want.Ops) {
		t.Fatalf("with held ops %+v, codec %+v", got, want)
	}
	for i, w := range want.Ops {
		g := got.Ops[i]
		if w == nil || g == nil { // a null op: the codec's frame
			if g != w {
				t.Fatalf("op %d: with held ops %+v, codec %+v", i, g, w)
			}
			continue
		}
		if g.Held && !oddHeld(w.Writer, w.Seq) {
			t.Fatalf("op %d %q/%d held, not asked to be", i, w.Writer, w.Seq)
		}
		if g.Held {
			w = &Op{Writer: w.Writer, Seq: w.Seq, HLC: w.HLC, Held: true}
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("op %d: with held ops %+v, codec %+v", i, g, w)
		}
	}
	if len(want.Ops) == 0 && !reflect.DeepEqual(got, want) {
		t.Fatalf("with held ops %+v, codec %+v", got, want)
	}
}

// Ops a receiver holds come back with their writer, seq and clock only,
// marked Held; the others as the codec decodes them; a held op whose
// value is not UTF-8, which the codec refuses, is taken.
func TestUnmarshalEnvelopeHeld(t *testing.T) {
	ops := sampleOps()
	for _, short := range []bool{false, true} {
		b, err := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: ops, ShortIDs: short})
		if err != nil {
			t.Fatal(err)
		}
		emptyInterned()
		got, err := UnmarshalEnvelopeHeld(b, oddHeld)
		if err != nil {
			t.Fatal(err)
		}
		emptyInterned()
		want, err := codecEnvelope(b)
		if err != nil {
			t.Fatal(err)
		}
		checkHeld(t, got, want)
		if !slices.ContainsFunc(got.Ops, func(o *Op) bool { return o.Held }) {
			t.Fatal("no op held")
		}
	}
	bad := &Op{Writer: idOf(0xab), Seq: 11, Key: ClaimKey("bad.p2p", idOf(0xab)), Value: "aaa\xff"}
	b, err := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: []*Op{bad}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codecEnvelope(b); err == nil {
		t.Fatal("the codec took a value that is not UTF-8")
	}
	got, err := UnmarshalEnvelopeHeld(b, oddHeld)
	if err != nil || len(got.Ops) != 1 || !got.Ops[0].Held || got.Ops[0].Seq != 11 {
		t.Fatalf("held op with a bad value: %+v, %v", got, err)
	}
	if _, err := UnmarshalEnvelopeHeld(b, nil); err == nil {
		t.Fatal("not held, a value that is not UTF-8 was taken")
	}
}

func BenchmarkUnmarshalOpsFrame(b *testing.B) {
	ops := make([]*Op, 0, 16)
	for len(ops) < 16 {
		ops = append(ops, sampleOps()[:5]...) // canonical ids, as nodes write them
	}
	frame, err := MarshalEnvelope(&Envelope{Kind: KindOps, Ops: ops[:16], ShortIDs: true})
	if err != nil {
		b.Fatal(err)
	}
	benchDecoders(b, "", frame)
	b.Run("held", func(b *testing.B) { // every op held by the receiver: skimmed
		b.ReportAllocs()
		all := func(string, uint64) bool { return true }
		for b.Loop() {
			if _, err := UnmarshalEnvelopeHeld(frame, all); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// overlayFrames are overlay frames of the shapes read by hand: heartbeats,
// ids short and whole, a digest, empty lists.
func overlayFrames() []*Envelope {
	a, b := idOf(0xab), idOf(0x01)
	sig := bytes.Repeat([]byte{7}, 64)
	return []*Envelope{
		{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{{Writer: a, Seq: 1764316800123, Sig: sig}, {Writer: b, Seq: 2, Sig: sig}, {Writer: "w1", Seq: 3}}}},
		{Kind: KindIHave, Overlay: &Overlay{IDs: []OpID{{Writer: a, Seq: 7}, {Writer: "w1", Seq: 8}, {Writer: b, Seq: 1 << 40}}}},
		{Kind: KindGraft, Overlay: &Overlay{IDs: []OpID{{Writer: b, Seq: 3}}}},
		{Kind: KindDigest, Overlay: &Overlay{Digest: []byte{1, 2, 3}}},
		{Kind: KindLiveness, Overlay: &Overlay{Heartbeats: []*Heartbeat{{Writer: a, Seq: 9, Sig: sig}}, IDs: []OpID{{Writer: a, Seq: 9}}, Digest: []byte{}}},
		{Kind: KindPrune, Overlay: &Overlay{}},
		{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{}}},
	}
}

// BenchmarkUnmarshalOverlayFrame: a frame of 12 heartbeats (a node's
// neighbours' in a second) and an ihave of 32 ids, by hand and through
// the codec.
func BenchmarkUnmarshalOverlayFrame(b *testing.B) {
	sig := bytes.Repeat([]byte{7}, 64)
	hb := &Envelope{Kind: KindHeartbeats, Overlay: &Overlay{}}
	ih := &Envelope{Kind: KindIHave, Overlay: &Overlay{}}
	for i := range 32 {
		if i < 12 {
			hb.Overlay.Heartbeats = append(hb.Overlay.Heartbeats, &Heartbeat{Writer: idOf(byte(i)), Seq: 1764316800123, Sig: sig})
		}
		ih.Overlay.IDs = append(ih.Overlay.IDs, OpID{Writer: idOf(byte(i)), Seq: uint64(100 + i)})
	}
	for _, e := range []*Envelope{hb, ih} {
		frame, err := Marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		benchDecoders(b, e.Kind+"/", frame)
	}
}

// BenchmarkMarshalOverlayFrame: 12 heartbeats written by hand and through
// the codec.
func BenchmarkMarshalOverlayFrame(b *testing.B) {
	sig := bytes.Repeat([]byte{7}, 64)
	e := &Envelope{Kind: KindHeartbeats, Overlay: &Overlay{}}
	for i := range 12 {
		e.Overlay.Heartbeats = append(e.Overlay.Heartbeats, &Heartbeat{Writer: idOf(byte(i)), Seq: 1764316800123, Sig: sig})
	}
	benchEncoders(b, e)
}

// benchEncoders times e's encoding through the codec and by hand.
func benchEncoders(b *testing.B, e *Envelope) {
	for _, by := range []struct {
		name string
		f    func(*Envelope) ([]byte, error)
	}{{"codec", func(e *Envelope) ([]byte, error) { return Marshal(e) }}, {"hand", MarshalEnvelope}} {
		b.Run(by.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := by.f(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchDecoders times frame's decoding through the codec and by hand,
// the sub-benchmarks' names after prefix.
func benchDecoders(b *testing.B, prefix string, frame []byte) {
	for _, by := range []struct {
		name string
		f    func([]byte) (*Envelope, error)
	}{{"codec", codecEnvelope}, {"hand", UnmarshalEnvelope}} {
		b.Run(prefix+by.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := by.f(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
