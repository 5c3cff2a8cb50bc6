package messages

import (
	"testing"
)

func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		want ParsedKey
		ok   bool
	}{
		{"claim:site.p2p:w1", ParsedKey{Kind: KeyClaim, Domain: "site.p2p", Writer: "w1"}, true},
		{"cleanup:site.p2p:w1", ParsedKey{Kind: KeyCleanup, Domain: "site.p2p", Writer: "w1"}, true},
		{"vote:site.p2p:w1:w2", ParsedKey{Kind: KeyVote, Domain: "site.p2p", Writer: "w1", Claimant: "w2"}, true},
		{"writer:w2:w1", ParsedKey{Kind: KeyWriter, Subject: "w2", Writer: "w1"}, true},
		{"network:w1", ParsedKey{Kind: KeyNetwork, Writer: "w1"}, true},
		{"", ParsedKey{}, false},
		{"claim", ParsedKey{}, false},
		{"claim:site.p2p", ParsedKey{}, false},
		{"claim:site.p2p:", ParsedKey{}, false},
		{"claim::w1", ParsedKey{}, false},
		{"claim:site.p2p:w1:extra", ParsedKey{}, false},
		{"vote:site.p2p:w1", ParsedKey{}, false},
		{"vote:site.p2p:w1:w2:w3", ParsedKey{}, false},
		{"vote:a:b:c:d:e:f", ParsedKey{}, false},
		{"network:", ParsedKey{}, false},
		{"other:x:y", ParsedKey{}, false},
		{":::", ParsedKey{}, false},
	} {
		got, err := ParseKey(c.key)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v, ok=%v", c.key, got, err, c.want, c.ok)
		}
		if err != nil && err.Error() == "" {
			t.Errorf("ParseKey(%q): empty error text", c.key)
		}
	}
}

// ParseKey runs for every write applied: it must not allocate.
func TestParseKeyAllocs(t *testing.T) {
	key := VoteKey("site.p2p", "w1", "w2")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseKey(key) }); n != 0 {
		t.Fatalf("%v allocations per ParseKey", n)
	}
}

// A key that parses is rebuilt exactly from its parts.
func FuzzParseKey(f *testing.F) {
	for _, k := range []string{"claim:a.p2p:w", "vote:a.p2p:w:c", "writer:x:y", "network:r", "cleanup:a:b", "vote:::", "a:b:c:d:e:f", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		pk, err := ParseKey(key)
		if err != nil {
			return
		}
		var back string
		switch pk.Kind {
		case KeyClaim:
			back = ClaimKey(pk.Domain, pk.Writer)
		case KeyCleanup:
			back = CleanupKey(pk.Domain, pk.Writer)
		case KeyVote:
			back = VoteKey(pk.Domain, pk.Writer, pk.Claimant)
		case KeyWriter:
			back = WriterKey(pk.Subject, pk.Writer)
		case KeyNetwork:
			back = NetworkKey(pk.Writer)
		default:
			t.Fatalf("ParseKey(%q) kind %q", key, pk.Kind)
		}
		if back != key {
			t.Fatalf("ParseKey(%q) = %+v, rebuilt %q", key, pk, back)
		}
	})
}
