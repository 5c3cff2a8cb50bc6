package certs

import (
	"errors"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

func TestRecordSuffix(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"first label dropped", "nas.home", "home"},
		{"deeper name", "www.dev.lan", "dev.lan"},
		{"case and dots", " NAS.Home. ", "home"},
		{"single label is itself", "printer", "printer"},
		{"public suffix parent keeps the name", "example.com", "example.com"},
		{"public suffix of two labels", "shop.co.uk", "shop.co.uk"},
		{"below a registrable name", "a.example.com", "example.com"},
		{"wildcard", "*.dev.lan", "lan"},
		{"bare wildcard", "*", ""},
		{"empty", "  ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RecordSuffix(tt.in); got != tt.want {
				t.Fatalf("RecordSuffix(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestServedScope(t *testing.T) {
	s := Served{
		Suffixes: []string{"p2p", "admin.p2p", "profile.p2p"},
		Addrs:    []netip.Addr{netip.MustParseAddr("127.0.0.1"), {}, netip.MustParseAddr("::ffff:127.0.0.2")},
		Internal: map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1"), "wiki.internal": netip.MustParseAddr("127.0.0.3")},
		Records:  []messages.LocalRecord{{Name: "nas.home"}, {Name: "example.com"}, {Name: "*"}},
		Subnets:  []messages.Subnet{{Base: "127.77.0.5", CIDR: 16}, {Base: "not an ip", CIDR: 24}},
	}
	want := Scope{
		Suffixes: []string{"example.com", "home", "p2p", "wiki.internal"},
		Ranges: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.0.0.2/32"),
			netip.MustParsePrefix("127.0.0.3/32"), netip.MustParsePrefix("127.77.0.0/16")},
	}
	if got := s.Scope(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Served.Scope() = %+v, want %+v", got, want)
	}
}

// Advice names each new gap once and notifies once per check that found
// one; a root without constraints is named once.
func TestAdvice(t *testing.T) {
	var scope atomic.Pointer[Scope]
	first := Scope{Suffixes: []string{"p2p"}, Ranges: []netip.Prefix{netip.MustParsePrefix("127.77.0.0/16")}}
	scope.Store(&first)
	ca, _ := openScoped(t, func() Scope { return *scope.Load() })
	var logs testutil.LogBuffer
	var notified atomic.Int32
	adv := NewAdvice(ca, func() Scope { return *scope.Load() }, slog.New(slog.NewTextHandler(&logs, nil)), func() { notified.Add(1) })

	adv.Check()
	if notified.Load() != 0 || strings.Contains(logs.String(), "regenerate-ca") {
		t.Fatalf("covered scope: notified %d, log %q; want nothing", notified.Load(), logs.String())
	}
	grown := Scope{Suffixes: []string{"p2p", "home"}, Ranges: []netip.Prefix{netip.MustParsePrefix("127.77.0.0/16"), netip.MustParsePrefix("198.51.100.0/24")}}
	scope.Store(&grown)
	adv.Check()
	if notified.Load() != 1 || !strings.Contains(logs.String(), "new=home,198.51.100.0/24") {
		t.Fatalf("grown scope: notified %d, log %q; want one notice naming home and 198.51.100.0/24", notified.Load(), logs.String())
	}
	adv.Check()
	if notified.Load() != 1 || strings.Count(logs.String(), "regenerate-ca") != 1 {
		t.Fatalf("same gap again: notified %d, log %q; want it named once", notified.Load(), logs.String())
	}

	old, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var oldLogs testutil.LogBuffer
	adv = NewAdvice(old, func() Scope { return grown }, slog.New(slog.NewTextHandler(&oldLogs, nil)), nil)
	adv.Check()
	adv.Check()
	if strings.Count(oldLogs.String(), "no name constraints") != 1 {
		t.Fatalf("unconstrained root: log %q, want it named once", oldLogs.String())
	}
}

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
