package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A peer that opens plugin streams naming domains no plugin here has
// (each up to a frame's megabyte) adds no counters: the node would hold
// every name it was sent, for good, and list them all in the stats'
// peerChannels.
func TestPeerCallsToUnknownDomainsAddNoCounters(t *testing.T) {
	testutil.NoLeaks(t)
	node, hostile := memEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := hostile.Dial(ctx, node.Addr().String(), node.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := node.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPeerCalls(connMesh{in}, &Table{}, 5*time.Second)
	for i := range 50 {
		s, err := out.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := in.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() { defer close(served); p.serve(in, ns) }()
		domain := fmt.Sprintf("%d.%s.p2p", i, strings.Repeat("x", 60<<10))
		if err := messages.WriteFrame(s, &messages.PluginCall{Domain: domain, Method: "ping", Wait: true}, MaxPeerFrame); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		var rep messages.PluginCallReply
		if err := messages.ReadFrame(s, &rep, MaxPeerFrame); err != nil || rep.Err == "" {
			t.Fatalf("call to a plugin not here: %+v %v", rep, err)
		}
		_ = s.Close()
		<-served
	}
	if st := p.Stats(); len(st) != 0 {
		t.Fatalf("%d counters for domains no plugin here has", len(st))
	}
}
