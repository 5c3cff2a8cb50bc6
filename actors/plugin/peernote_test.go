package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// connMesh is the peer layer reduced to one established connection: the
// Mesh PeerCalls needs to reach that peer.
type connMesh struct{ conn transport.Conn }

func (m connMesh) Conn(id string) (transport.Conn, bool) {
	return m.conn, id == m.conn.PeerID()
}
func (connMesh) Providers(string) []string                            { return nil }
func (connMesh) Announce([]string)                                    {}
func (connMesh) HandleStreams(func(transport.Conn, transport.Stream)) {}
func (connMesh) HandleDatagrams(func(transport.Conn, []byte))         {}

// silentPeer is a connected peer (an in-memory transport endpoint) that
// takes the streams opened to it and never reads or answers them.
func silentPeer(t *testing.T) transport.Conn {
	t.Helper()
	ea, eb := memEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := ea.Dial(ctx, eb.Addr().String(), eb.ID())
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// A peer.call a handler sends as a notification waits on the peer (here
// one that never answers, up to the peer timeout) off the session's
// read loop: the handler's answers go on arriving. Past
// maxNotifyInflight waiting at once, more are dropped and the drop is
// logged.
func TestPeerNotificationDoesNotStallTheSession(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "notes", "notes.p2p", "ok", nil)
	peer := silentPeer(t)
	h := newHarness(t, dir, func(d *Deps) {
		d.Peers = NewPeerCalls(connMesh{peer}, d.Table, 30*time.Second)
	})
	rt := h.waitRunning("notes.p2p")
	for _, n := range []int{1, maxNotifyInflight + 8} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		resp, err := rt.Handle(ctx, &HandleRequest{Method: "GET", Path: fmt.Sprintf("/peernote/%d/%s", n, peer.PeerID())})
		cancel()
		if err != nil || resp.Status != 200 {
			t.Fatalf("handle after %d peer.call notifications to a silent peer: %v %v (after %v)", n, resp, err, time.Since(start))
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(h.log.String(), "peer notifications dropped") {
			return fmt.Errorf("no drop logged in:\n%s", h.log.String())
		}
		return nil
	})
}

// memEndpoints is two in-memory transport endpoints on one network,
// closed with the test.
func memEndpoints(t *testing.T) (a, b transport.Endpoint) {
	t.Helper()
	network := transport.NewMemNetwork()
	ia, _ := identity.Generate()
	ib, _ := identity.Generate()
	ea, eb := network.Listen(ia, nil), network.Listen(ib, nil)
	t.Cleanup(func() { _ = ea.Close(); _ = eb.Close() })
	return ea, eb
}
