package token

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"peerdns/transport/identity"
)

func TestIssueCheck(t *testing.T) {
	id, _ := identity.Generate()
	other, _ := identity.Generate()
	now := time.UnixMilli(1_800_000_000_000)
	tok, issued := Issue(id, now, 0)
	if issued.ExpiresAt-issued.Timestamp != DefaultLifetime.Milliseconds() {
		t.Fatalf("lifetime %d", issued.ExpiresAt-issued.Timestamp)
	}
	got, err := Check(tok, now.Add(time.Minute))
	if err != nil || got.PeerID != id.ID() {
		t.Fatalf("check: %+v %v", got, err)
	}
	// URL-safe and unpadded forms of the same token.
	raw, _ := base64.StdEncoding.DecodeString(tok)
	if _, err := Check(base64.RawURLEncoding.EncodeToString(raw), now); err != nil {
		t.Fatalf("url-safe: %v", err)
	}
	otherTok, _ := Issue(other, now, time.Hour)
	if got, err := Check(otherTok, now); err != nil || got.PeerID != other.ID() {
		t.Fatalf("another peer's valid token: %+v %v", got, err)
	}

	tamper := func(f func(*Token)) string {
		var t Token
		_ = json.Unmarshal(raw, &t)
		f(&t)
		b, _ := json.Marshal(t)
		return base64.StdEncoding.EncodeToString(b)
	}
	for name, bad := range map[string]string{
		"expired":       tok,
		"empty":         "",
		"not base64":    "%%%",
		"not json":      base64.StdEncoding.EncodeToString([]byte("hello")),
		"extra field":   base64.StdEncoding.EncodeToString([]byte(`{"peerId":"x","timestamp":1,"expiresAt":2,"signature":"","admin":true}`)),
		"longer life":   tamper(func(t *Token) { t.ExpiresAt += 1000 }),
		"other peer id": tamper(func(t *Token) { t.PeerID = other.ID() }),
		"bad sig hex":   tamper(func(t *Token) { t.Signature = "zz" }),
		"no peer":       tamper(func(t *Token) { t.PeerID = "" }),
		"too long":      strings.Repeat("A", MaxLen+1),
		// A valid token's JSON followed by more: not a JSON object.
		"second object": base64.StdEncoding.EncodeToString(append(append([]byte{}, raw...), `{"peerId":"x"}`...)),
		"trailing junk": base64.StdEncoding.EncodeToString(append(append([]byte{}, raw...), " junk"...)),
	} {
		at := now
		if name == "expired" {
			at = now.Add(DefaultLifetime + time.Millisecond)
		}
		if _, err := Check(bad, at); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	future, _ := Issue(id, now.Add(time.Hour), time.Hour)
	if _, err := Check(future, now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("issued in the future: %v", err)
	}
}

func TestFromHeaders(t *testing.T) {
	for _, c := range [][3]string{
		{"Bearer abc", "", "abc"}, {"bearer abc", "", "abc"}, {"", "xyz", "xyz"}, {"Bearer abc", "xyz", "abc"},
		{"Basic Zm9v", "", ""}, {"", "", ""},
	} {
		if got := FromHeaders(c[0], c[1]); got != c[2] {
			t.Errorf("FromHeaders(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

func FuzzCheck(f *testing.F) {
	id, _ := identity.Generate()
	tok, _ := Issue(id, time.UnixMilli(1_800_000_000_000), time.Hour)
	f.Add(tok)
	f.Add("")
	f.Add("e30=")
	f.Fuzz(func(t *testing.T, s string) {
		if tk, err := Check(s, time.UnixMilli(1_800_000_000_001)); err == nil && tk.PeerID == "" {
			t.Fatal("valid token without a peer")
		}
	})
}
