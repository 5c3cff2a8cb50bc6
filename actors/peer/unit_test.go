package peer

import (
	"net"
	"strings"
	"testing"
	"time"

	"peerdns/messages"
)

func TestParseTarget(t *testing.T) {
	id := strings.Repeat("ab", 32)
	tests := []struct {
		in, id, addr string
		ok           bool
	}{
		{"127.0.0.1:7740", "", "127.0.0.1:7740", true},
		{" node.example:7740 ", "", "node.example:7740", true},
		{id + "@10.0.0.2:7740", id, "10.0.0.2:7740", true},
		{"[::1]:7740", "", "[::1]:7740", true},
		{"nohost", "", "", false},
		{"127.0.0.1:0", "", "", false},
		{"127.0.0.1:70000", "", "", false},
		{"0.0.0.0:7740", "", "", false},
		{"zz@127.0.0.1:1", "", "", false},
		{id + "@", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTarget(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("parseTarget(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if tt.ok && (got.id != tt.id || got.addr != tt.addr) {
				t.Fatalf("parseTarget(%q) = %+v, want %s@%s", tt.in, got, tt.id, tt.addr)
			}
		})
	}
}

func TestMergeAddrs(t *testing.T) {
	got, changed := mergeAddrs([]string{"127.0.0.1:1"}, []string{"127.0.0.1:1", "bad", "127.0.0.1:2", "0.0.0.0:3"}, 8)
	if !changed || strings.Join(got, ",") != "127.0.0.1:1,127.0.0.1:2" {
		t.Fatalf("mergeAddrs = %v, %v", got, changed)
	}
	if _, changed := mergeAddrs(got, []string{"127.0.0.1:2"}, 8); changed {
		t.Fatal("mergeAddrs reported a change for a known address")
	}
	capped, _ := mergeAddrs(nil, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, 2)
	if len(capped) != 2 {
		t.Fatalf("mergeAddrs kept %d addresses over the cap", len(capped))
	}
}

func TestAdvertised(t *testing.T) {
	if got := advertised(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7740}); len(got) != 1 || got[0] != "127.0.0.1:7740" {
		t.Fatalf("advertised(127.0.0.1) = %v", got)
	}
	got := advertised(&net.UDPAddr{IP: net.IPv4zero, Port: 7740})
	if len(got) == 0 {
		t.Fatal("advertised(0.0.0.0) is empty")
	}
	for _, a := range got {
		if !validAddr(a) || !strings.HasSuffix(a, ":7740") {
			t.Fatalf("advertised(0.0.0.0) has %q", a)
		}
	}
}

func TestDialGate(t *testing.T) {
	g := &dialGate{connected: map[string]bool{}, dialing: map[string]bool{}}
	if g.skip("") {
		t.Fatal("an unknown id is never skipped")
	}
	if g.skip("a") {
		t.Fatal("first dial of a skipped")
	}
	if !g.skip("a") {
		t.Fatal("second concurrent dial of a not skipped")
	}
	g.done("a")
	g.set([]string{"a"})
	if !g.skip("a") {
		t.Fatal("connected peer not skipped")
	}
	g.set(nil)
	if g.skip("a") {
		t.Fatal("disconnected peer skipped")
	}
}

func TestPropsWithMissingDepsStops(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	pid, err := sys.Root.SpawnNamed(Props(Deps{}), "peers")
	if err != nil {
		t.Fatal(err)
	}
	// The actor stops itself: a request gets no answer but nothing panics.
	if _, err := sys.Root.RequestFuture(pid, &messages.GetPeers{}, 200*time.Millisecond).Result(); err == nil {
		t.Fatal("a supervisor without deps answered")
	}
}
