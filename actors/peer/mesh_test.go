package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// tid is a valid tunnel id made of one repeated hex digit.
func tid(digit byte) string { return strings.Repeat(string(digit), 64) }

type fakeConn struct {
	transport.Conn
	id   string
	done chan struct{}
}

func newFakeConn(id string) *fakeConn     { return &fakeConn{id: id, done: make(chan struct{})} }
func (f *fakeConn) PeerID() string        { return f.id }
func (f *fakeConn) Done() <-chan struct{} { return f.done }
func (f *fakeConn) Close(string) error    { close(f.done); return nil }

func wantProviders(t *testing.T, m *Mesh, id string, want ...string) {
	t.Helper()
	if got := m.Providers(id); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("Providers(%.8s) = %v, want %v", id, got, want)
	}
}

func TestMeshState(t *testing.T) {
	m := NewMesh()
	x, y := tid('a'), tid('b')
	c1, c2 := newFakeConn("p1"), newFakeConn("p2")
	m.setAnnounced("p1", []string{x}) // no connection yet: ignored
	wantProviders(t, m, x)
	m.setConn("p2", c2)
	m.setConn("p1", c1)
	m.setAnnounced("p2", []string{y, x, y})
	m.setAnnounced("p1", []string{y})
	wantProviders(t, m, x, "p2")
	wantProviders(t, m, y, "p1", "p2")
	if c, ok := m.Conn("p1"); !ok || c != c1 {
		t.Fatalf("Conn(p1) = %v, %v", c, ok)
	}
	if _, ok := m.Conn("p3"); ok {
		t.Fatal("Conn(p3) found")
	}

	// The caller owns what Providers returns.
	got := m.Providers(y)
	got[0] = "mutated"
	wantProviders(t, m, y, "p1", "p2")

	// Replace semantics.
	m.setAnnounced("p2", []string{y})
	wantProviders(t, m, x)
	wantProviders(t, m, y, "p1", "p2")

	// A closed connection hides the peer before the supervisor drops it.
	c1.Close("gone")
	if _, ok := m.Conn("p1"); ok {
		t.Fatal("Conn(p1) found after close")
	}
	wantProviders(t, m, y, "p2")

	// Dropping a connection that was replaced is a no-op; dropping the
	// published one takes the announcement with it.
	m.dropConn("p1", newFakeConn("p1"))
	if m.announcedBy("p1") != 1 {
		t.Fatal("stale dropConn removed the announcement")
	}
	m.dropConn("p1", c1)
	if m.announcedBy("p1") != 0 {
		t.Fatal("announcement kept after dropConn")
	}
	// A new connection for a peer starts with no announcement.
	m.setConn("p2", newFakeConn("p2"))
	wantProviders(t, m, y)
}

func TestMeshAnnounceNormalises(t *testing.T) {
	m := NewMesh()
	m.Announce([]string{tid('b'), "not hex", tid('a'), tid('b'), strings.ToUpper(tid('c'))})
	if got := m.ownIDs(); !slices.Equal(got, []string{tid('a'), tid('b')}) {
		t.Fatalf("own ids = %v", got)
	}
	many := make([]string, messages.MaxTunnelIDs+10)
	for i := range many {
		many[i] = fmt.Sprintf("%064x", i)
	}
	m.Announce(many)
	if got := m.ownIDs(); len(got) != messages.MaxTunnelIDs || got[0] != many[0] {
		t.Fatalf("own ids: %d, want the first %d", len(got), messages.MaxTunnelIDs)
	}
	m.Announce(nil)
	if got := m.ownIDs(); len(got) != 0 {
		t.Fatalf("own ids after Announce(nil) = %d", len(got))
	}
}

// waitProviders waits until n's mesh lists exactly want for id.
func waitProviders(t *testing.T, n *testNode, id string, want ...*testNode) {
	t.Helper()
	var ids []string
	for _, w := range want {
		ids = append(ids, w.id.ID())
	}
	slices.Sort(ids)
	testutil.Eventually(t, 10*time.Second, func() error {
		got := n.mesh.Providers(id)
		if !slices.Equal(got, ids) && (len(got) != 0 || len(ids) != 0) {
			return fmt.Errorf("%s Providers(%.8s) = %v, want %v", n.name, id, shortAll(got), shortAll(ids))
		}
		return nil
	})
}

func TestMeshProvidersFollowAnnouncements(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	c := joinNode(t, "C", a)
	waitMesh(t, 15*time.Second, a, b, c)
	x, y, z := tid('1'), tid('2'), tid('3')

	b.mesh.Announce([]string{x, y})
	c.mesh.Announce([]string{y})
	waitProviders(t, a, x, b)
	waitProviders(t, a, y, b, c)
	waitProviders(t, c, x, b)
	waitProviders(t, b, y, c)
	if conn, ok := a.mesh.Conn(b.id.ID()); !ok || conn.PeerID() != b.id.ID() {
		t.Fatalf("A Conn(B) = %v, %v", conn, ok)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, p := range diag(t, a).Peers {
			if p.ID == b.id.ID() && p.AnnouncedTunnels != 2 {
				return fmt.Errorf("A diagnostics: B announces %d tunnels, want 2", p.AnnouncedTunnels)
			}
		}
		return nil
	})

	// The full set replaces the previous one.
	b.mesh.Announce([]string{y})
	waitProviders(t, a, x)
	waitProviders(t, a, y, b, c)

	// Gone with B's connection.
	b.stop()
	waitProviders(t, a, y, c)
	waitProviders(t, c, y)
	if _, ok := a.mesh.Conn(b.id.ID()); ok {
		t.Fatal("A still has a Conn to B after B stopped")
	}

	// A fresh B announces while (or before) it connects: peers get the
	// set when its sessions are established.
	b.restart()
	b.mesh.Announce([]string{z})
	waitProviders(t, a, z, b)
	waitProviders(t, c, z, b)
	if d := diag(t, a).Summary.RefusedTunnelAnnouncements; d != 0 {
		t.Fatalf("refused announcements = %d between honest nodes", d)
	}
}

// echoHandler copies what it reads back and records who opened streams.
type echoHandler struct {
	mu      sync.Mutex
	openers []string
	calls   atomic.Int64
}

func (h *echoHandler) serve(c transport.Conn, s transport.Stream) {
	defer s.Close()
	h.calls.Add(1)
	h.mu.Lock()
	h.openers = append(h.openers, c.PeerID())
	h.mu.Unlock()
	b, err := io.ReadAll(s)
	if err != nil {
		return
	}
	_, _ = s.Write(b)
}

// waitConn waits until from's mesh has an established connection to to
// (waitMesh may count a peer whose replacement session is still
// handshaking).
func waitConn(t *testing.T, from, to *testNode) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := from.mesh.Conn(to.id.ID()); !ok {
			return fmt.Errorf("%s has no Conn to %s", from.name, to.name)
		}
		return nil
	})
}

// roundTrip opens a stream from n to peer, sends payload, half-closes and
// returns what comes back.
func roundTrip(t *testing.T, n *testNode, peer *testNode, payload []byte) ([]byte, error) {
	t.Helper()
	conn, ok := n.mesh.Conn(peer.id.ID())
	if !ok {
		return nil, fmt.Errorf("%s has no Conn to %s", n.name, peer.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.Write(payload); err != nil {
		return nil, err
	}
	if err := s.CloseWrite(); err != nil { // FIN: the handler reads to EOF
		return nil, err
	}
	return io.ReadAll(s)
}

func TestMeshStreamsReachHandlerBothWays(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	waitConn(t, a, b)
	waitConn(t, b, a)
	ha, hb := &echoHandler{}, &echoHandler{}
	a.mesh.HandleStreams(ha.serve)
	b.mesh.HandleStreams(hb.serve)
	payload := make([]byte, 1<<20)
	_, _ = rand.Read(payload)

	for _, dir := range []struct {
		from, to *testNode
		h        *echoHandler
	}{{a, b, hb}, {b, a, ha}} {
		// Several at once: each stream is its own handler goroutine.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := roundTrip(t, dir.from, dir.to, payload)
				if err == nil && !bytes.Equal(got, payload) {
					err = fmt.Errorf("echo of %d bytes came back as %d different bytes", len(payload), len(got))
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("%s → %s: %v", dir.from.name, dir.to.name, err)
			}
		}
		dir.h.mu.Lock()
		openers := slices.Compact(dir.h.openers)
		dir.h.mu.Unlock()
		if len(openers) != 1 || openers[0] != dir.from.id.ID() {
			t.Fatalf("%s's handler saw openers %v, want only %s", dir.to.name, shortAll(openers), dir.from.name)
		}
	}
}

func TestMeshWithoutHandlerResetsStreams(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	waitConn(t, a, b)
	if _, err := roundTrip(t, a, b, []byte("hello")); err == nil {
		t.Fatal("a stream to a node without a handler was answered")
	} else if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline") {
		t.Fatalf("stream was left hanging instead of reset: %v", err)
	}
	// Streams are reset one by one, not the connection: a handler set
	// later gets the next stream.
	h := &echoHandler{}
	b.mesh.HandleStreams(h.serve)
	if got, err := roundTrip(t, a, b, []byte("hello")); err != nil || string(got) != "hello" {
		t.Fatalf("after HandleStreams: %q, %v", got, err)
	}
}

func TestBadTunnelAnnouncementRefusedAndCounted(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	// B's key on a raw endpoint: a writer that sends what our own
	// Announce would never send.
	r := impersonate(t, b, a)
	announce := func(ids ...string) {
		t.Helper()
		if err := r.conn.Send(&messages.Envelope{Kind: messages.KindTunnels, Tunnels: &messages.TunnelIDs{IDs: ids}}); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(want int64) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if got := diag(t, a).Summary.RefusedTunnelAnnouncements; got != want {
				return fmt.Errorf("refused announcements = %d, want %d", got, want)
			}
			return nil
		})
	}
	x := tid('d')
	announce(x)
	waitProviders(t, a, x, b)

	announce(x, "zz-not-hex")
	refused(1)
	waitLog(t, a, "refused tunnel announcement", "not 64 lowercase hex")
	waitProviders(t, a, x) // the previous announcement is withdrawn too

	announce(x)
	waitProviders(t, a, x, b)
	many := make([]string, messages.MaxTunnelIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("%064x", i)
	}
	announce(many...)
	refused(2)
	waitLog(t, a, "refused tunnel announcement", "ids=4097")
	waitProviders(t, a, x)

	// Refused, not disconnected: B stays a peer and may announce again.
	if ids := a.peerIDs(); len(ids) != 1 {
		t.Fatalf("A peers = %v after a refused announcement", shortAll(ids))
	}
	announce(x)
	waitProviders(t, a, x, b)
}

// A peer that is never admitted opens a stream before its hello: the
// handler must never see it.
func TestStreamsOfUnadmittedPeerNotHandedOver(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	h := &echoHandler{}
	a.mesh.HandleStreams(h.serve)
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	f, _ := identity.Generate()
	r := dialRaw(t, f, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := r.conn.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("early")); err != nil {
		t.Fatal(err)
	}
	r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: f.ID(), Network: net.Key, Root: net.Root}})
	if ref := r.recvKind(t, messages.KindRefuse); ref.Refuse.Code != messages.RefuseNotWriter {
		t.Fatalf("refusal = %+v", ref.Refuse)
	}
	select {
	case <-r.conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("refused connection not closed")
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("handler got %d streams of a refused peer", n)
	}
	// The handler works for an admitted peer.
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	waitConn(t, b, a)
	if got, err := roundTrip(t, b, a, []byte("late")); err != nil || string(got) != "late" {
		t.Fatalf("admitted peer's stream: %q, %v", got, err)
	}
	if n := h.calls.Load(); n != 1 {
		t.Fatalf("handler calls = %d, want 1 (the admitted peer's)", n)
	}
}
