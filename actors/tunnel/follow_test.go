package tunnel

import (
	"strings"
	"testing"

	"peerdns/messages"
)

func TestWantKey(t *testing.T) {
	k1 := "hs://" + strings.Repeat("a", 64)
	k2 := "hs://" + strings.Repeat("b", 64)
	targets := map[string]messages.DomainTarget{
		"d.p2p": {Domain: "d.p2p", Hash: k2, Services: []messages.Service{{ServiceName: "web", Key: k1, Port: 80, Protocol: "tcp"}}},
	}
	rec := func(domain, follow, service string) clientRecord {
		return clientRecord{Opts: messages.TunnelClientOpts{Domain: domain, Key: k1, ServiceName: service}, Follow: follow}
	}
	for _, tt := range []struct {
		name string
		r    clientRecord
		want string
	}{
		{"domain follower moves to the hash", rec("d.p2p", followDomain, ""), k2},
		{"fixed key stays", rec("d.p2p", "", "web"), ""},
		{"subscription takes the service key", rec("d.p2p", followService, "web"), k1},
		{"service not in the claim: keep", rec("d.p2p", followService, "gone"), ""},
		{"no claim in force: keep", rec("other.p2p", followDomain, ""), ""},
	} {
		if got := wantKey(tt.r, targets); got != tt.want {
			t.Errorf("%s: wantKey = %q, want %q", tt.name, got, tt.want)
		}
	}
	if followOf(strings.ToUpper(k2[5:]), k2) != "" { // not a hs:// key
		t.Error("followOf without scheme")
	}
	if followOf("hs://"+strings.ToUpper(k2[5:]), k2) != followDomain {
		t.Error("followOf is case-sensitive")
	}
	if followOf(k1, k2) != "" || followOf(k1, "") != "" {
		t.Error("followOf follows another key")
	}
	r := rec("d.p2p", followService, "web")
	if r.isService() || !r.isSubscription() {
		t.Error("a subscription is not a service")
	}
	r = rec("d.p2p", followDomain, "web")
	if !r.isService() || r.isSubscription() {
		t.Error("an owner's named client is a service")
	}
}

// A view's changed names ask for a refresh only when one is followed: by
// a client that follows its domain or service, or a subscribe-all.
func TestFollowsAny(t *testing.T) {
	entry := func(domain, follow string) *clientEntry {
		return &clientEntry{rec: clientRecord{Opts: messages.TunnelClientOpts{Domain: domain}, Follow: follow}}
	}
	a := &Actor{clients: map[string]*clientEntry{
		"c1": entry("d.p2p", followDomain),
		"c2": entry("s.p2p", followService),
		"c3": entry("fixed.p2p", ""),
	}, subAll: map[string]bool{"all.p2p": true}}
	for _, tt := range []struct {
		names []string
		want  bool
	}{
		{nil, false},
		{[]string{"other.p2p", "fixed.p2p"}, false},
		{[]string{"other.p2p", "d.p2p"}, true},
		{[]string{"s.p2p"}, true},
		{[]string{"all.p2p"}, true},
	} {
		if got := a.followsAny(tt.names); got != tt.want {
			t.Errorf("followsAny(%v) = %v, want %v", tt.names, got, tt.want)
		}
	}
	if (&Actor{clients: map[string]*clientEntry{"c3": entry("fixed.p2p", "")}}).followsAny([]string{"fixed.p2p"}) {
		t.Error("a fixed-key client follows nothing")
	}
}
