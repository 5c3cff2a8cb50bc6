package tunnel

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"peerdns/messages"
)

func TestKeysFromSeed(t *testing.T) {
	a, b := deriveServerKey("seed", false), deriveServerKey("seed", false)
	if a.URL != b.URL || a.Announced != a.URL[5:] || a.Secret != nil || !messages.ValidTunnelID(a.Announced) {
		t.Fatalf("non-secure key %+v / %+v", a, b)
	}
	s := deriveServerKey("seed", true)
	if s.URL == a.URL || s.Announced == s.URL[5:] || !messages.ValidTunnelID(s.Announced) || hex.EncodeToString(s.Secret) != s.URL[5:] {
		t.Fatalf("secure key %+v", s)
	}
	if deriveServerKey("seed2", false).URL == a.URL {
		t.Fatal("two seeds gave one key")
	}
	// Pinned: a seed must give the same key on every machine and release.
	if got := deriveServerKey("peerdns", false).URL; got != "hs://a16b1040bc37aaf63599eadfee8ed88770752c2e85c3bbb426be0e43d47ecd97" {
		t.Fatalf("key of seed \"peerdns\" changed: %s", got)
	}
	if got := deriveServerKey("peerdns", true).Announced; got != "46608477bffee2bfcb79f89b4f5a21eed30c126f55ec7bee7938d8a41b9d2b84" {
		t.Fatalf("secure announced id of seed \"peerdns\" changed: %s", got)
	}
	// A client given either URL finds the server's announced id.
	for _, k := range []serverKey{a, s} {
		ck, err := parseClientKey("hs://" + strings.ToUpper(k.URL[5:]))
		if err != nil {
			t.Fatal(err)
		}
		if ck.Plain != k.Announced && ck.Secure != k.Announced {
			t.Fatalf("client key %+v does not reach %s", ck, k.Announced)
		}
	}
}

func TestOpenFrames(t *testing.T) {
	id := strings.Repeat("a", 64)
	for _, tt := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"good", frameOf(t, &messages.TunnelOpen{ID: id}), true},
		{"good with proof", frameOf(t, &messages.TunnelOpen{ID: id, Proof: make([]byte, 32)}), true},
		{"short proof", frameOf(t, &messages.TunnelOpen{ID: id, Proof: make([]byte, 5)}), false},
		{"upper-case id", frameOf(t, &messages.TunnelOpen{ID: strings.ToUpper(strings.Repeat("a", 64))}), false},
		{"short id", frameOf(t, &messages.TunnelOpen{ID: "ab"}), false},
		{"too large", []byte{0, 0, 4, 1}, false},
		{"truncated", frameOf(t, &messages.TunnelOpen{ID: id})[:10], false},
		{"empty", nil, false},
		{"unknown field", append([]byte{0, 0, 0, 3}, 0xa1, 0x09, 0x01), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readOpen(bytes.NewReader(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("readOpen = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func frameOf(t testing.TB, v any) []byte {
	var b bytes.Buffer
	if err := writeFrame(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func FuzzReadOpen(f *testing.F) {
	f.Add(frameOf(f, &messages.TunnelOpen{ID: strings.Repeat("a", 64), Proof: make([]byte, 32)}))
	f.Add([]byte{0, 0, 0, 1, 0xa0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := readOpen(bytes.NewReader(b))
		if err == nil && (!messages.ValidTunnelID(m.ID) || (len(m.Proof) != 0 && len(m.Proof) != 32)) {
			t.Fatalf("accepted %+v", m)
		}
	})
}
