package transport

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"peerdns/messages"
	"peerdns/transport/identity"
)

// reachEnvelopes are well-formed reach frames (also the fuzz seeds).
func reachEnvelopes() []*messages.Envelope {
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	return []*messages.Envelope{
		{Kind: messages.KindHello, Hello: &messages.Hello{ID: id, Network: "n", Observed: "203.0.113.101:7740"}},
		{Kind: messages.KindConnectRequest, ConnectRequest: &messages.ConnectRequest{Peer: id}},
		{Kind: messages.KindConnect, Connect: &messages.Connect{Peer: id, Observed: "203.0.113.102:7740", Addrs: []string{"198.51.100.34:7740"}}},
		{Kind: messages.KindProbe, Probe: &messages.Probe{Nonce: 42}},
		{Kind: messages.KindProbeReply, ProbeReply: &messages.ProbeReply{Nonce: 42, Port: 40000}},
		{Kind: messages.KindProbeReply, ProbeReply: &messages.ProbeReply{Nonce: 42, Seen: "203.0.113.101:7740"}},
	}
}

func TestReachEnvelopesRoundTrip(t *testing.T) {
	for _, m := range reachEnvelopes() {
		b, err := EncodeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadEnvelope(bytes.NewReader(b), nil)
		if err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
		if fmt.Sprint(got) == "" || got.Kind != m.Kind {
			t.Fatalf("%s came back as %+v", m.Kind, got)
		}
	}
	bad := []*messages.Envelope{
		{Kind: messages.KindConnect, Connect: &messages.Connect{}},
		{Kind: messages.KindConnect, Connect: &messages.Connect{Peer: "p", Addrs: make([]string, messages.MaxConnectAddrs+1)}},
		{Kind: messages.KindConnectRequest},
		{Kind: messages.KindProbe, Probe: &messages.Probe{}, Ping: &messages.Ping{}},
	}
	for _, m := range bad {
		if err := m.Validate(); err == nil {
			t.Fatalf("%+v validated", m)
		}
	}
}

// TestWriteFrameSeeds keeps the FuzzReadFrame corpus in testdata in step
// with reachEnvelopes (it writes missing seed files).
func TestWriteFrameSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadFrame")
	for i, m := range reachEnvelopes() {
		b, _ := EncodeFrame(m)
		path := filepath.Join(dir, fmt.Sprintf("reach-%d", i))
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if got, err := os.ReadFile(path); err == nil && string(got) == want {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzParseProbePacket(f *testing.F) {
	f.Add(ProbePacket(0))
	f.Add(ProbePacket(1<<63 + 5))
	f.Add([]byte(messages.ProbeMagic))
	f.Add([]byte{0xc0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := ParseProbePacket(b)
		if ok && !bytes.Equal(ProbePacket(n), b) {
			t.Fatalf("parsed %x as nonce %d, which encodes differently", b, n)
		}
	})
}

func FuzzPunchAddr(f *testing.F) {
	for _, s := range []string{"203.0.113.1:7740", "[2001:db8::1]:7740", "0.0.0.0:1", "224.0.0.1:5", "255.255.255.255:9", "host:1", "[fe80::1%eth0]:7740", "1.2.3.4:0", "::ffff:1.2.3.4:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ap, ok := messages.PunchAddr(s)
		if !ok {
			return
		}
		ip := ap.Addr()
		if ip.IsUnspecified() || ip.IsMulticast() || ap.Port() == 0 || ip.Zone() != "" || ip.Is4In6() {
			t.Fatalf("PunchAddr(%q) accepted %v", s, ap)
		}
	})
}

// TestRawPacketsShareTheSocket: a probe packet sent to the endpoint's
// UDP port reaches ReadRaw, and WriteRaw leaves from that same port (the
// address peers see), while QUIC keeps working on it.
func TestRawPacketsShareTheSocket(t *testing.T) {
	id, _ := identity.Generate()
	ep, err := Listen(Config{Identity: id, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	epAddr := ep.Addr().(*net.UDPAddr).AddrPort()
	ps, err := OpenProbeSocket(ep.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type read struct {
		n    int
		from netip.AddrPort
		err  error
	}
	b := make([]byte, 64)
	got := make(chan read, 1)
	go func() {
		n, from, err := ep.ReadRaw(ctx, b)
		got <- read{n, from, err}
	}()
	// quic-go keeps non-QUIC packets only once someone reads them: send
	// until the reader is in place.
	var r read
	for r.err == nil && r.n == 0 {
		if err := ps.Send(7, epAddr); err != nil {
			t.Fatal(err)
		}
		select {
		case r = <-got:
		case <-time.After(50 * time.Millisecond):
		}
	}
	n, from, err := r.n, r.from, r.err
	if err != nil {
		t.Fatal(err)
	}
	if nonce, ok := ParseProbePacket(b[:n]); !ok || nonce != 7 || from.Port() != uint16(ps.Port()) {
		t.Fatalf("read %x from %v", b[:n], from)
	}
	if err := ep.WriteRaw(ProbePacket(9), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(ps.Port()))); err != nil {
		t.Fatal(err)
	}
	seen, ok := ps.Wait(9, netip.MustParseAddr("127.0.0.1"), time.Now().Add(5*time.Second))
	if !ok || seen != epAddr {
		t.Fatalf("probe socket saw %v (%v), want it from %v", seen, ok, epAddr)
	}
}
