package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"peerdns/messages"
)

func frame(payload []byte) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

func mustEncode(t testing.TB, m *messages.Envelope) []byte {
	t.Helper()
	b, err := EncodeEnvelope(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frameCases are the table cases; they also seed FuzzReadFrame.
func frameCases(t testing.TB) []struct {
	name    string
	in      []byte
	want    *messages.Envelope // what a good frame decodes to
	wantErr error
	anyErr  bool
} {
	helloEnv := &messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: "ab", Network: "n"}}
	opsEnv := &messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{{Writer: "w", Seq: 1, Key: "k", Sig: []byte{1, 2}}}}
	vvEnv := &messages.Envelope{Kind: messages.KindVV}
	tunnelsEnv := &messages.Envelope{Kind: messages.KindTunnels, Tunnels: &messages.TunnelIDs{IDs: []string{strings.Repeat("ab", 32)}}}
	noTunnelsEnv := &messages.Envelope{Kind: messages.KindTunnels, Tunnels: &messages.TunnelIDs{}}
	hello, ops, vv := mustEncode(t, helloEnv), mustEncode(t, opsEnv), mustEncode(t, vvEnv)
	tunnels, noTunnels := mustEncode(t, tunnelsEnv), mustEncode(t, noTunnelsEnv)
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, MaxFrameSize+1)
	return []struct {
		name    string
		in      []byte
		want    *messages.Envelope
		wantErr error
		anyErr  bool
	}{
		{name: "hello", in: frame(hello), want: helloEnv},
		{name: "ops", in: frame(ops), want: opsEnv},
		{name: "empty vv", in: frame(vv), want: vvEnv},
		{name: "tunnels", in: frame(tunnels), want: tunnelsEnv},
		{name: "no tunnels", in: frame(noTunnels), want: noTunnelsEnv},
		// {1: "tunnels"}: the kind without its body.
		{name: "tunnels without body", in: frame([]byte{0xa1, 0x01, 0x67, 't', 'u', 'n', 'n', 'e', 'l', 's'}), wantErr: messages.ErrBadEnvelope},
		{name: "oversize header", in: huge, wantErr: ErrFrameTooLarge},
		{name: "max uint32 header", in: []byte{0xff, 0xff, 0xff, 0xff}, wantErr: ErrFrameTooLarge},
		{name: "short header", in: []byte{0, 0}, wantErr: io.ErrUnexpectedEOF},
		{name: "empty input", in: nil, wantErr: io.EOF},
		{name: "truncated body", in: frame(hello)[:10], wantErr: io.ErrUnexpectedEOF},
		{name: "garbage cbor", in: frame([]byte{0xff, 0x00, 0x13}), anyErr: true},
		{name: "zero length", in: frame(nil), anyErr: true},
		{name: "unknown field", in: frame([]byte{0xa2, 0x01, 0x64, 'p', 'i', 'n', 'g', 0x18, 0x63, 0x01}), anyErr: true},
		{name: "kind without body", in: frame([]byte{0xa1, 0x01, 0x64, 'p', 'i', 'n', 'g'}), wantErr: messages.ErrBadEnvelope},
		{name: "unknown kind", in: frame([]byte{0xa1, 0x01, 0x63, 'f', 'o', 'o'}), wantErr: messages.ErrBadEnvelope},
	}
}

func TestReadEnvelope(t *testing.T) {
	for _, tt := range frameCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ReadEnvelope(bytes.NewReader(tt.in), nil)
			switch {
			case tt.want != nil:
				if err != nil || !reflect.DeepEqual(m, tt.want) {
					t.Fatalf("ReadEnvelope = %+v, %v; want %+v", m, err, tt.want)
				}
			case tt.anyErr:
				if err == nil {
					t.Fatalf("ReadEnvelope = %+v; want an error", m)
				}
			default:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadEnvelope error = %v, want %v", err, tt.wantErr)
				}
			}
		})
	}
}

func TestFrameRoundTripReusesBuffer(t *testing.T) {
	var buf bytes.Buffer
	a := &messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{{Writer: "w", Seq: 7, Key: "claim:x.p2p:w", Value: "v", Sig: bytes.Repeat([]byte{0xaa}, 64)}}}
	b := &messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{{Writer: "w", Seq: 8, Key: "claim:y.p2p:w", Value: "v", Sig: bytes.Repeat([]byte{0xbb}, 64)}}}
	for _, m := range []*messages.Envelope{a, b} {
		b, err := EncodeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
	}
	rbuf := make([]byte, 0, 4096)
	first, err := ReadEnvelope(&buf, rbuf)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ReadEnvelope(&buf, rbuf)
	if err != nil {
		t.Fatal(err)
	}
	// The second read overwrote the shared buffer: the first message must
	// still hold its own signature bytes (the decoder copies).
	if first.Ops[0].Sig[0] != 0xaa || second.Ops[0].Sig[0] != 0xbb {
		t.Fatalf("signatures alias the read buffer: %x %x", first.Ops[0].Sig[:1], second.Ops[0].Sig[:1])
	}
}

func TestEncodeFrameTooLarge(t *testing.T) {
	big := &messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{{Writer: "w", Seq: 1, Value: string(make([]byte, MaxFrameSize))}}}
	if _, err := EncodeFrame(big); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("EncodeFrame(huge) = %v, want ErrFrameTooLarge", err)
	}
}

// A frame is its payload behind its length, as ReadFrame reads it.
func TestEncodeFrameIsPrefixedPayload(t *testing.T) {
	for _, m := range []*messages.Envelope{
		{Kind: messages.KindOps, Ops: []*messages.Op{{Writer: "w", Seq: 7, Key: "claim:x.p2p:w", Value: "v", Sig: bytes.Repeat([]byte{0xaa}, 64)}}},
		{Kind: messages.KindPing, Ping: &messages.Ping{NoPong: true}},
	} {
		b, err := EncodeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := messages.MarshalEnvelope(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, frame(payload)) {
			t.Fatalf("%s: frame %x, want %x", m.Kind, b, frame(payload))
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, tt := range frameCases(f) {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ReadEnvelope(bytes.NewReader(in), nil)
		if err != nil {
			return
		}
		// Whatever decodes must be valid and re-encode.
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded envelope fails Validate: %v", err)
		}
		if _, err := EncodeEnvelope(m); err != nil {
			t.Fatalf("decoded envelope does not re-encode: %v", err)
		}
	})
}

// BenchmarkEncodeFrame: a frame of 16 vote ops as a session sends it.
func BenchmarkEncodeFrame(b *testing.B) {
	w := strings.Repeat("ab", 32)
	var ops []*messages.Op
	for i := range 16 {
		ops = append(ops, &messages.Op{Writer: w, Seq: uint64(i + 1), HLC: messages.HLC{Wall: 1700000000000}, Key: messages.VoteKey("x.p2p", w, w), Value: messages.VoteMarker, Sig: bytes.Repeat([]byte{1}, 64)})
	}
	m := &messages.Envelope{Kind: messages.KindOps, Ops: ops}
	b.ReportAllocs()
	for range b.N {
		if _, err := EncodeFrame(m); err != nil {
			b.Fatal(err)
		}
	}
}
