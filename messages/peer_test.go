package messages

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var (
	tunnelA = strings.Repeat("a", 64)
	tunnelB = strings.Repeat("0123456789abcdef", 4)
)

func TestEnvelopeValidate(t *testing.T) {
	op := &Op{Writer: "w", Seq: 1}
	tests := []struct {
		name string
		env  Envelope
		ok   bool
	}{
		{"hello", Envelope{Kind: KindHello, Hello: &Hello{ID: "a"}}, true},
		{"hello without id", Envelope{Kind: KindHello, Hello: &Hello{}}, false},
		{"hello with join", Envelope{Kind: KindHello, Hello: &Hello{ID: "a", Join: &JoinRequest{Invite: "i", Proof: []byte{1}}}}, true},
		{"join without proof", Envelope{Kind: KindHello, Hello: &Hello{ID: "a", Join: &JoinRequest{Invite: "i"}}}, false},
		{"accept", Envelope{Kind: KindAccept, Accept: &Accept{}}, true},
		{"accept without body", Envelope{Kind: KindAccept}, false},
		{"refuse", Envelope{Kind: KindRefuse, Refuse: &Refuse{Code: RefuseNotWriter}}, true},
		{"refuse without code", Envelope{Kind: KindRefuse, Refuse: &Refuse{}}, false},
		{"empty vv", Envelope{Kind: KindVV}, true},
		{"vv", Envelope{Kind: KindVV, VV: VersionVector{"w": 3}}, true},
		{"want", Envelope{Kind: KindWant, VV: VersionVector{"w": 3}}, true},
		{"ops", Envelope{Kind: KindOps, Ops: []*Op{op}}, true},
		{"empty ops", Envelope{Kind: KindOps}, false},
		{"nil op", Envelope{Kind: KindOps, Ops: []*Op{nil}}, false},
		{"op seq 0", Envelope{Kind: KindOps, Ops: []*Op{{Writer: "w"}}}, false},
		{"peers", Envelope{Kind: KindPeers, Peers: []PeerInfo{{ID: "a"}}}, true},
		{"ping", Envelope{Kind: KindPing, Ping: &Ping{}}, true},
		{"pong", Envelope{Kind: KindPong, Ping: &Ping{}}, true},
		{"tunnels", Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{IDs: []string{tunnelA, tunnelB}}}, true},
		{"tunnels empty set", Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{}}, true},
		// Content is TunnelIDs.Validate's: the receiver refuses it without
		// dropping the connection.
		{"tunnels bad id", Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{IDs: []string{"xyz"}}}, true},
		{"tunnels without body", Envelope{Kind: KindTunnels}, false},
		{"tunnels with ping", Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{}, Ping: &Ping{}}, false},
		{"ping with tunnels", Envelope{Kind: KindPing, Ping: &Ping{}, Tunnels: &TunnelIDs{}}, false},
		{"two bodies", Envelope{Kind: KindPing, Ping: &Ping{}, Accept: &Accept{}}, false},
		{"vv with ops", Envelope{Kind: KindVV, Ops: []*Op{op}}, false},
		{"unknown kind", Envelope{Kind: "nope"}, false},
		{"no kind", Envelope{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.env.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadEnvelope) {
				t.Fatalf("Validate() = %v, not ErrBadEnvelope", err)
			}
		})
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   *Envelope
	}{
		{"hello with join", &Envelope{Kind: KindHello, Hello: &Hello{ID: "a", Network: "n", Root: "r", Addrs: []string{"127.0.0.1:1"},
			Join: &JoinRequest{Invite: "inv", Proof: []byte{1, 2, 3}}}}},
		{"accept", &Envelope{Kind: KindAccept, Accept: &Accept{Network: "n", Root: "r"}}},
		{"refuse", &Envelope{Kind: KindRefuse, Refuse: &Refuse{Code: RefuseInviteExpired, Reason: "invite expired at 2026-01-02T03:04:05Z"}}},
		{"want", &Envelope{Kind: KindWant, VV: VersionVector{"w": 7}}},
		{"peers", &Envelope{Kind: KindPeers, Peers: []PeerInfo{{ID: "p", Addrs: []string{"10.0.0.1:7740"}}}}},
		{"ping", &Envelope{Kind: KindPing, Ping: &Ping{SentUnixNano: 42}}},
		{"ping without pong", &Envelope{Kind: KindPing, Ping: &Ping{SentUnixNano: 42, NoPong: true}}},
		{"tunnels", &Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{IDs: []string{tunnelB, tunnelA}}}},
		{"tunnels nil set", &Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{}}},
		{"tunnels empty set", &Envelope{Kind: KindTunnels, Tunnels: &TunnelIDs{IDs: []string{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var out Envelope
			if err := Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&out, tt.in) || out.Validate() != nil {
				t.Fatalf("round trip = %+v, want %+v", out, *tt.in)
			}
		})
	}
}

func TestTunnelIDsValidate(t *testing.T) {
	many := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = tunnelA
		}
		return ids
	}
	tests := []struct {
		name string
		ids  []string
		ok   bool
	}{
		{"none", nil, true},
		{"two", []string{tunnelA, tunnelB}, true},
		{"at the cap", many(MaxTunnelIDs), true},
		{"over the cap", many(MaxTunnelIDs + 1), false},
		{"upper case", []string{strings.ToUpper(tunnelB)}, false},
		{"short", []string{tunnelA[:63]}, false},
		{"long", []string{tunnelA + "a"}, false},
		{"not hex", []string{strings.Repeat("g", 64)}, false},
		{"hs prefix", []string{"hs://" + tunnelA}, false},
		{"empty", []string{""}, false},
		{"one bad among good", []string{tunnelA, "x", tunnelB}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&TunnelIDs{IDs: tt.ids}).Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%d ids) = %v, want ok=%v", len(tt.ids), err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadTunnelIDs) {
				t.Fatalf("Validate() = %v, not ErrBadTunnelIDs", err)
			}
		})
	}
}

var tunnelIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzValidTunnelID checks the hand-written check against a regexp.
func FuzzValidTunnelID(f *testing.F) {
	for _, s := range []string{tunnelA, tunnelB, strings.ToUpper(tunnelB), tunnelA[:63], tunnelA + "\n", "", "hs://" + tunnelA} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidTunnelID(s), tunnelIDPattern.MatchString(s); got != want {
			t.Fatalf("ValidTunnelID(%q) = %v, want %v", s, got, want)
		}
	})
}
