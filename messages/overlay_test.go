package messages

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestOverlayValidate(t *testing.T) {
	hb := &Heartbeat{Writer: "w", Seq: 7, Sig: []byte{1}}
	many := make([]PeerInfo, MaxSample+1)
	tests := []struct {
		name string
		env  Envelope
		ok   bool
	}{
		{"leave", Envelope{Kind: KindLeave, Overlay: &Overlay{Sample: []PeerInfo{{ID: "a"}}}}, true},
		{"leave empty sample", Envelope{Kind: KindLeave, Overlay: &Overlay{}}, true},
		{"shuffle", Envelope{Kind: KindShuffle, Overlay: &Overlay{Sample: []PeerInfo{{ID: "a", Addrs: []string{"x"}}}}}, true},
		{"shuffle too big", Envelope{Kind: KindShuffle, Overlay: &Overlay{Sample: many}}, false},
		{"shuffle-reply", Envelope{Kind: KindShuffleReply, Overlay: &Overlay{}}, true},
		{"heartbeats", Envelope{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{hb}}}, true},
		{"no heartbeats", Envelope{Kind: KindHeartbeats, Overlay: &Overlay{}}, false},
		{"nil heartbeat", Envelope{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{nil}}}, false},
		{"heartbeat seq 0", Envelope{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{{Writer: "w"}}}}, false},
		{"suspicions", Envelope{Kind: KindSuspicions, Overlay: &Overlay{Suspicions: []*Suspicion{{Writer: "w", By: "b", At: 1}}}}, true},
		{"liveness", Envelope{Kind: KindLiveness, Overlay: &Overlay{Heartbeats: []*Heartbeat{hb}}}, true},
		{"empty liveness", Envelope{Kind: KindLiveness, Overlay: &Overlay{}}, false},
		{"no suspicions", Envelope{Kind: KindSuspicions, Overlay: &Overlay{}}, false},
		{"suspicion without author", Envelope{Kind: KindSuspicions, Overlay: &Overlay{Suspicions: []*Suspicion{{Writer: "w", At: 1}}}}, false},
		{"ihave", Envelope{Kind: KindIHave, Overlay: &Overlay{IDs: []OpID{{Writer: "w", Seq: 1}}}}, true},
		{"ihave empty", Envelope{Kind: KindIHave, Overlay: &Overlay{}}, false},
		{"graft", Envelope{Kind: KindGraft, Overlay: &Overlay{IDs: []OpID{{Writer: "w", Seq: 1}}}}, true},
		{"prune", Envelope{Kind: KindPrune, Overlay: &Overlay{}}, true},
		{"prune without body", Envelope{Kind: KindPrune}, false},
		{"digest", Envelope{Kind: KindDigest, Overlay: &Overlay{Digest: make([]byte, DigestSize)}}, true},
		{"short digest", Envelope{Kind: KindDigest, Overlay: &Overlay{Digest: []byte{1}}}, false},
		{"overlay with ping", Envelope{Kind: KindPrune, Overlay: &Overlay{}, Ping: &Ping{}}, false},
		{"ping with overlay", Envelope{Kind: KindPing, Ping: &Ping{}, Overlay: &Overlay{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.env.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadEnvelope) {
				t.Fatalf("Validate() = %v, want ErrBadEnvelope", err)
			}
		})
	}
}

func TestOverlayRoundTrip(t *testing.T) {
	for _, env := range overlaySeeds() {
		b, err := Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		var got Envelope
		if err := Unmarshal(b, &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", env.Kind, err)
		}
		if !reflect.DeepEqual(&got, env) {
			t.Fatalf("round trip of %s = %+v, want %+v", env.Kind, got, env)
		}
	}
}

func TestHeartbeatSigningBytes(t *testing.T) {
	a := HeartbeatSigningBytes("net", "w", 12)
	if !bytes.Equal(a, HeartbeatSigningBytes("net", "w", 12)) {
		t.Fatal("signing bytes are not deterministic")
	}
	for _, other := range [][]byte{
		HeartbeatSigningBytes("net2", "w", 12),
		HeartbeatSigningBytes("net", "w2", 12),
		HeartbeatSigningBytes("net", "w", 13),
		HeartbeatSigningBytes("ne", "tw", 12),
	} {
		if bytes.Equal(a, other) {
			t.Fatalf("signing bytes collide: %q", other)
		}
	}
}

func overlaySeeds() []*Envelope {
	id := strings.Repeat("ab", 32)
	return []*Envelope{
		{Kind: KindLeave, Overlay: &Overlay{Sample: []PeerInfo{{ID: id, Addrs: []string{"192.0.2.1:7740"}}}}},
		{Kind: KindShuffle, Overlay: &Overlay{Sample: []PeerInfo{{ID: id}, {ID: "not-an-id", Addrs: []string{"::::"}}}}},
		{Kind: KindShuffleReply, Overlay: &Overlay{}},
		{Kind: KindHeartbeats, Overlay: &Overlay{Heartbeats: []*Heartbeat{{Writer: id, Seq: 1764316800000, Sig: bytes.Repeat([]byte{7}, 64)}}}},
		{Kind: KindIHave, Overlay: &Overlay{IDs: []OpID{{Writer: id, Seq: 3}, {Writer: id, Seq: 4}}}},
		{Kind: KindGraft, Overlay: &Overlay{IDs: []OpID{{Writer: id, Seq: 3}}}},
		{Kind: KindPrune, Overlay: &Overlay{}},
		{Kind: KindDigest, Overlay: &Overlay{Digest: bytes.Repeat([]byte{9}, DigestSize)}},
	}
}

// FuzzOverlayEnvelope decodes arbitrary bytes as an envelope: it must
// never panic, and whatever decodes and validates must encode again and
// decode to the same value.
func FuzzOverlayEnvelope(f *testing.F) {
	for _, env := range overlaySeeds() {
		b, err := Marshal(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var env Envelope
		if Unmarshal(b, &env) != nil || env.Validate() != nil {
			return
		}
		again, err := Marshal(&env)
		if err != nil {
			t.Fatalf("Marshal of a valid envelope: %v", err)
		}
		var back Envelope
		if err := Unmarshal(again, &back); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(&back, &env) {
			t.Fatalf("round trip changed %+v into %+v", env, back)
		}
	})
}

func TestVVDigest(t *testing.T) {
	a := VVDigest(VersionVector{"w1": 3, "w2": 9})
	if len(a) != DigestSize {
		t.Fatalf("digest of %d bytes, want %d", len(a), DigestSize)
	}
	if !bytes.Equal(a, VVDigest(VersionVector{"w2": 9, "w1": 3, "w3": 0})) {
		t.Fatal("equal vectors digest differently")
	}
	for _, other := range []VersionVector{{"w1": 3, "w2": 8}, {"w1": 3}, {"w1": 3, "w2": 9, "w4": 1}, {"w1\x00": 3, "w2": 9}} {
		if bytes.Equal(a, VVDigest(other)) {
			t.Fatalf("VVDigest(%v) equals another vector's", other)
		}
	}
}
