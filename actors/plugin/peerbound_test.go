package plugin

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// A peer that opens plugin streams and sends their requests slowly (or
// calls a handler that is slow to answer) has at most maxPeerCalls of
// them served at once, each holding up to MaxPeerFrame for up to the
// peer timeout: one more is refused at once, without its request being
// read, while another peer is served as before, and the peer is served
// again once its streams end.
func TestPeerCallsOfOnePeerAreBounded(t *testing.T) {
	testutil.NoLeaks(t)
	network := transport.NewMemNetwork()
	ids := make([]*identity.Identity, 3)
	eps := make([]transport.Endpoint, 3)
	for i := range ids {
		ids[i], _ = identity.Generate()
		eps[i] = network.Listen(ids[i], nil)
	}
	t.Cleanup(func() {
		for _, e := range eps {
			_ = e.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node := eps[0]
	link := func(from transport.Endpoint) (out, in transport.Conn) {
		out, err := from.Dial(ctx, node.Addr().String(), node.ID())
		if err != nil {
			t.Fatal(err)
		}
		if in, err = node.Accept(ctx); err != nil {
			t.Fatal(err)
		}
		return out, in
	}
	hostileOut, hostileIn := link(eps[1])
	otherOut, otherIn := link(eps[2])
	p := NewPeerCalls(connMesh{hostileIn}, &Table{}, 10*time.Second)
	var served sync.WaitGroup
	defer served.Wait()
	open := func(out, in transport.Conn) transport.Stream {
		s, err := out.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := in.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		served.Add(1)
		go func() { defer served.Done(); p.serve(in, ns) }()
		return s
	}
	// call sends a whole request on a new stream and returns the answer's
	// error text.
	call := func(out, in transport.Conn) string {
		s := open(out, in)
		defer s.Close()
		if err := messages.WriteFrame(s, &messages.PluginCall{Domain: "app.p2p", Method: "ping", Wait: true}, MaxPeerFrame); err != nil {
			return err.Error()
		}
		_ = s.CloseWrite()
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		var rep messages.PluginCallReply
		if err := messages.ReadFrame(s, &rep, MaxPeerFrame); err != nil {
			return err.Error()
		}
		return rep.Err
	}
	var held []transport.Stream
	for range maxPeerCalls {
		s := open(hostileOut, hostileIn)
		// A megabyte declared, a kilobyte sent.
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], MaxPeerFrame)
		if _, err := s.Write(append(h[:], make([]byte, 1024)...)); err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	// Once the held streams are all being served, one more is refused.
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := call(hostileOut, hostileIn); !strings.Contains(got, "at once") {
			return fmt.Errorf("a stream past %d of one peer: %q, want refused at once", maxPeerCalls, got)
		}
		return nil
	})
	if got := call(otherOut, otherIn); !strings.Contains(got, "not loaded") {
		t.Fatalf("another peer's call: %q, want served (plugin not loaded)", got)
	}
	for _, s := range held {
		s.Abort()
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := call(hostileOut, hostileIn); !strings.Contains(got, "not loaded") {
			return fmt.Errorf("the peer's call after its streams ended: %q", got)
		}
		return nil
	})
}

// A handler's answer to a peer's call that is over MaxPeerFrame is an
// error the caller is told ("over the ... a peer call carries"), counted
// as a failure; it was a reset stream, counted as a call answered.
func TestPeerCallAnswerTooLarge(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "app", "app.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	h.waitRunning("app.p2p")
	node, caller := memEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := caller.Dial(ctx, node.Addr().String(), node.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := node.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPeerCalls(connMesh{in}, h.table, 10*time.Second)
	call := func(method string) (messages.PluginCallReply, error) {
		s, err := out.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ns, err := in.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() { defer close(served); p.serve(in, ns) }()
		defer func() { <-served }()
		if err := messages.WriteFrame(s, &messages.PluginCall{Domain: "app.p2p", Method: method, Wait: true}, MaxPeerFrame); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		var rep messages.PluginCallReply
		err = messages.ReadFrame(s, &rep, MaxPeerFrame)
		return rep, err
	}
	if rep, err := call("ping"); err != nil || rep.Err != "" || !strings.Contains(string(rep.Result), "pong") {
		t.Fatalf("ping: %+v %v", rep, err)
	}
	rep, err := call("big")
	if err != nil || !strings.Contains(rep.Err, "a peer call carries") {
		t.Fatalf("an answer over MaxPeerFrame: %+v %v, want the reason", rep.Err, err)
	}
	st := p.Stats()
	if len(st) != 1 || st[0].CallsIn != 1 || st[0].FailuresIn != 1 {
		t.Fatalf("stats %+v, want one call answered and one failure", st)
	}
}

// A peer.send to a plugin loaded here whose handler does not run (it is
// restarting) is lost, and counted as a failure, not as a send taken.
func TestPeerSendToStoppedHandlerIsAFailure(t *testing.T) {
	testutil.NoLeaks(t)
	node, caller := memEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := caller.Dial(ctx, node.Addr().String(), node.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := node.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	table := &Table{}
	table.m.Store(&map[string]*Runtime{"app.p2p": {Domain: "app.p2p", Handles: true}})
	p := NewPeerCalls(connMesh{in}, table, 5*time.Second)
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
	if err := messages.WriteFrame(s, &messages.PluginCall{Domain: "app.p2p", Method: "note"}, MaxPeerFrame); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseWrite()
	<-served
	_ = s.Close()
	st := p.Stats()
	if len(st) != 1 || st[0].SendsIn != 0 || st[0].FailuresIn != 1 {
		t.Fatalf("stats %+v, want one failure and no send", st)
	}
}
