package tunnel

import (
	"net"
	"strconv"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// A DNS answer for a domain wakes its clients: one whose port was taken
// (state error, next bind attempt a minute away) binds at once after the
// port is freed and the domain is answered.
func TestDomainAnsweredWakesClients(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(nil)
	b := tn.node(func(d *Deps) { d.LookupBackoff = transport.Backoff{Min: time.Minute, Max: time.Minute} })
	connect(t, a, b)
	_, url := a.createServer(targetOpts(echoServer(t)))
	b.own("woken.p2p")
	squat, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := squat.Addr().(*net.TCPAddr).Port
	r := ask[*messages.CreateTunnelClientReply](t, b, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "woken.p2p", Key: url, Port: port,
	}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	b.waitClient(r.ID, messages.TunnelError)
	squat.Close()
	b.sys.Root.Send(b.pid, &messages.DomainAnswered{Domain: "WOKEN.p2p"})
	addr := b.waitClient(r.ID, messages.TunnelRunning)
	if addr != net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) {
		t.Fatalf("client address %q", addr)
	}
	echoHash(t, addr, 1<<20, false)
}
