package certs

import (
	"errors"
	"net/netip"
	"testing"

	"peerdns/messages"
)

// A local record under a private public suffix (github.io, blogspot.com:
// names the public suffix list gives to different owners, as it gives
// the names under com) asks the root to cover that record's name, not
// every name below the suffix: a root made from it refuses to sign for
// another owner's site.
func TestRecordUnderPrivatePublicSuffix(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"me.github.io", "me.github.io"},
		{"www.me.github.io", "me.github.io"},
		{"x.blogspot.com", "x.blogspot.com"},
		{"*.me.github.io", "me.github.io"},
	} {
		if got := RecordSuffix(tt.in); got != tt.want {
			t.Errorf("RecordSuffix(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	served := Served{Suffixes: []string{"p2p"}, Records: []messages.LocalRecord{{Name: "me.github.io"}}}
	ca, _ := openScoped(t, served.Scope)
	if _, err := ca.Issue("me.github.io", netip.Addr{}); err != nil {
		t.Fatalf("issue for the record's own name: %v", err)
	}
	if _, err := ca.Issue("other.github.io", netip.Addr{}); !errors.Is(err, ErrOutsideScope) {
		t.Fatalf("issue for another github.io site = %v, want ErrOutsideScope", err)
	}
}
