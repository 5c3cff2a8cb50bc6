package portmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	natpmp "github.com/jackpal/go-nat-pmp"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A node bound to loopback never asks a router: none could forward to it.
func TestLoopbackIsOff(t *testing.T) {
	asked := false
	m := Start(Config{Port: 7740, Local: netip.MustParseAddr("127.0.0.1"),
		Gateway: func() (netip.Addr, error) { asked = true; return netip.Addr{}, errors.New("x") }})
	defer m.Close()
	s := m.Status()
	if s.State != messages.PortMapOff || !strings.Contains(s.Detail, "loopback") {
		t.Fatalf("Status() = %+v, want off for loopback", s)
	}
	if asked {
		t.Fatal("the gateway was looked up for a loopback-bound node")
	}
	if Advertise(s) != "" {
		t.Fatalf("Advertise(%+v) = %q, want none", s, Advertise(s))
	}
	m.Close() // twice is fine
}

func TestOff(t *testing.T) {
	m := Off("PORT_MAP=false")
	m.Close()
	if s := m.Status(); s.State != messages.PortMapOff || s.Detail != "PORT_MAP=false" {
		t.Fatalf("Off().Status() = %+v", s)
	}
}

// Without a gateway the mapper makes its few quick tries, says so once,
// and then asks again only every Retry, quietly.
func TestNoGatewayGoesQuiet(t *testing.T) {
	var logs testutil.LogBuffer
	tries := make(chan struct{}, 100)
	m := Start(Config{Port: 7740, Tries: 3, Retry: 20 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Gateway: func() (netip.Addr, error) {
			tries <- struct{}{}
			return netip.Addr{}, errors.New("no default route")
		}})
	defer m.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(tries) < 6 {
			return fmt.Errorf("%d tries so far", len(tries))
		}
		return nil
	})
	s := m.Status()
	if s.State != messages.PortMapUnavailable || !strings.Contains(s.Detail, "no default route") {
		t.Fatalf("Status() = %+v, want unavailable with the reason", s)
	}
	if n := strings.Count(logs.String(), "no router mapped the peer port"); n != 1 {
		t.Fatalf("logged the give-up line %d times, want once:\n%s", n, logs.String())
	}
}

// A gateway that refuses (ICMP port unreachable: nothing listens on the
// NAT-PMP port) fails a try at once instead of waiting out the timeout.
func TestRefusingGatewayFailsFast(t *testing.T) {
	start := time.Now()
	m := Start(Config{Port: 7740, Tries: 2, Timeout: 10 * time.Second, Retry: time.Hour,
		Gateway: func() (netip.Addr, error) { return netip.MustParseAddr("127.0.0.1"), nil }})
	defer m.Close()
	testutil.Eventually(t, 8*time.Second, func() error {
		if s := m.Status(); s.State != messages.PortMapUnavailable {
			return fmt.Errorf("state %q (%s)", s.State, s.Detail)
		}
		return nil
	})
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("two refused tries took %v", d)
	}
	if s := m.Status(); strings.Contains(s.Detail, "UPnP") {
		t.Fatalf("a loopback gateway got an SSDP search: %+v", s)
	}
	m.Close()
	if s := m.Status(); s.State != messages.PortMapUnavailable {
		t.Fatalf("after Close without a mapping: %+v", s)
	}
}

func TestUnusableGateway(t *testing.T) {
	for _, gw := range []string{"0.0.0.0", "224.0.0.1", "2001:db8::1"} {
		m := &Mapper{cfg: Config{Port: 7740, Gateway: func() (netip.Addr, error) { return netip.MustParseAddr(gw), nil }}}
		m.cfg.defaults()
		if _, err := m.mapOnce(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "cannot be asked") {
			t.Errorf("mapOnce with gateway %s: err %v, want refused", gw, err)
		}
	}
}

func TestCheckGrant(t *testing.T) {
	ok := &natpmp.AddPortMappingResult{InternalPort: 7740, MappedExternalPort: 7740, PortMappingLifetimeInSeconds: 7200}
	tests := []struct {
		name string
		r    *natpmp.AddPortMappingResult
		err  error
		want string
	}{
		{"ours", ok, nil, ""},
		{"error", nil, errors.New("Non-zero result code 2"), "result code 2"},
		{"another internal port", &natpmp.AddPortMappingResult{InternalPort: 22, MappedExternalPort: 22, PortMappingLifetimeInSeconds: 60}, nil, "not ours"},
		{"no external port", &natpmp.AddPortMappingResult{InternalPort: 7740, PortMappingLifetimeInSeconds: 60}, nil, "no external port"},
		{"no lifetime", &natpmp.AddPortMappingResult{InternalPort: 7740, MappedExternalPort: 7740}, nil, "no lifetime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkGrant(tt.r, tt.err, 7740)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("checkGrant = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPublic(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"203.0.113.7", true}, {"8.8.8.8", true}, {"198.51.100.1", true},
		{"192.168.1.1", false}, {"10.0.0.1", false}, {"172.16.5.4", false},
		{"100.64.0.1", false}, {"100.127.255.254", false}, {"100.128.0.1", true},
		{"127.0.0.1", false}, {"169.254.1.1", false}, {"0.0.0.0", false}, {"224.0.0.1", false},
	}
	for _, tt := range tests {
		if got := Public(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Public(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestAdvertise(t *testing.T) {
	tests := []struct {
		s    *messages.PortMapping
		want string
	}{
		{nil, ""},
		{&messages.PortMapping{State: messages.PortMapMapped, External: "203.0.113.5:7740", Advertised: true}, "203.0.113.5:7740"},
		{&messages.PortMapping{State: messages.PortMapMapped, External: "10.0.0.5:7740"}, ""},
		{&messages.PortMapping{State: messages.PortMapUnavailable}, ""},
	}
	for _, tt := range tests {
		if got := Advertise(tt.s); got != tt.want {
			t.Errorf("Advertise(%+v) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestRenewAfter(t *testing.T) {
	tests := []struct{ life, want time.Duration }{
		{2 * time.Hour, time.Hour},
		{time.Minute, 30 * time.Second},
		{20 * time.Second, 15 * time.Second},
		{10 * time.Second, 7500 * time.Millisecond},
		{4 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		if got := renewAfter(tt.life); got != tt.want || got >= tt.life {
			t.Errorf("renewAfter(%v) = %v, want %v (before the lifetime ends)", tt.life, got, tt.want)
		}
	}
}
