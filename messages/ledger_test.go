package messages

import (
	"testing"
)

func TestParseKey(t *testing.T) {
	for key, want := range map[string]ParsedKey{
		"claim:site.p2p:w1":   {Kind: KeyClaim, Domain: "site.p2p", Writer: "w1"},
		"cleanup:site.p2p:w1": {Kind: KeyCleanup, Domain: "site.p2p", Writer: "w1"},
		"vote:site.p2p:w1:w2": {Kind: KeyVote, Domain: "site.p2p", Writer: "w1", Claimant: "w2"},
		"writer:w2:w1":        {Kind: KeyWriter, Subject: "w2", Writer: "w1"},
		"network:w1":          {Kind: KeyNetwork, Writer: "w1"},
	} {
		if got, err := ParseKey(key); err != nil || got != want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", key, got, err, want)
		}
	}
	for _, key := range []string{"", "claim", "claim:site.p2p", "claim:site.p2p:", "claim::w1", "claim:site.p2p:w1:extra",
		"vote:site.p2p:w1", "vote:site.p2p:w1:w2:w3", "vote:a:b:c:d:e:f", "network:", "other:x:y", ":::"} {
		got, err := ParseKey(key)
		if err == nil || got != (ParsedKey{}) || err.Error() == "" {
			t.Errorf("ParseKey(%q) = %+v, %v; want an error naming it", key, got, err)
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
