package localdns

import (
	"peerdns/messages"

	"errors"
	"net/netip"
	"strings"
	"testing"

	"peerdns/internal/view"
)

func TestCheckWildcard(t *testing.T) {
	v := &view.Snapshot{Domains: map[string]*view.Domain{
		"site.p2p": {Name: "site.p2p", Status: "resolved"},
		"nas.lan":  {Name: "nas.lan", Status: "tie"},
	}, Internal: map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1")}}
	for _, tt := range []struct {
		name, want string // want: "" allowed, else part of the message
	}{
		{"*.dev.lan", ""},
		{"www.site.p2p", ""},
		{"*.lan", ""}, // above a claimed domain: exact and p2p names still win
		{"*.site.p2p", `shadow the claimed p2p domain "site.p2p"`},
		{"*.a.site.p2p", `shadow the claimed p2p domain "site.p2p"`},
		{"*.nas.lan", `"nas.lan"`},
		{"*.admin.p2p", "internal domain"},
		{"*.p2p", "every unclaimed .p2p name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkWildcard(tt.name, v)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkWildcard(%q) = %v, want nil", tt.name, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, messages.ErrInvalidRecord) {
				t.Fatalf("checkWildcard(%q) = %v, want an ErrInvalid naming %s", tt.name, err, tt.want)
			}
		})
	}
	if err := checkWildcard("*.site.p2p", nil); err != nil {
		t.Fatalf("without a view: %v", err)
	}
}
