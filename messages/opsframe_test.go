package messages

import (
	"bytes"
	"reflect"
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
