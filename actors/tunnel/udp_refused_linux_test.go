package tunnel

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A host that refuses a flow's sends (nftables dropping them in its
// output hook, so the write fails with EPERM) loses those datagrams, as
// a network would: they are counted in DroppedDatagrams and the flow
// goes on, the same flow answering once the rule is gone. Both ends'
// writes are refused in turn: the server side's to the target and the
// client side's back to the client socket. The test runs itself in a
// network namespace of its own (pft-…, loopback only) where the rules
// touch nothing else.
func TestUDPFlowSurvivesRefusedSends(t *testing.T) {
	if os.Getenv("PFT_IN_NETNS") == "" {
		if testing.Short() {
			t.Skip("-short: runs itself in a network namespace")
		}
		if os.Geteuid() != 0 {
			t.Skip("needs root to make a network namespace (run as root with iproute2 and nftables)")
		}
		for _, tool := range []string{"ip", "nft"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("needs %s (apt-get install iproute2 nftables)", tool)
			}
		}
		ns := fmt.Sprintf("pft-tun%d", os.Getpid()%100000)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add: %v: %s", err, out)
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
		if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("lo up: %v: %s", err, out)
		}
		cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestUDPFlowSurvivesRefusedSends$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "PFT_IN_NETNS=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in namespace %s:\n%s", ns, out)
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("the test failed in its namespace: %v", err)
		}
		return
	}
	nft := func(script string) {
		t.Helper()
		if out, err := exec.Command("nft", script).CombinedOutput(); err != nil {
			t.Fatalf("nft %s: %v: %s", script, err, out)
		}
	}
	testutil.NoLeaks(t)
	tn := newTestNet(t, false) // in-memory peers: the only UDP here is the flow's
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	echo := udpEcho(t)
	o := targetOpts(echo)
	o.UDP = true
	_, url := a.createServer(o)
	b.own("refused.p2p")
	_, addr := b.createUDPClient("refused.p2p", url)
	c := udpSocket(t, addr)
	from := udpAsk(t, c, "before")

	_, echoPort, _ := net.SplitHostPort(echo)
	_, clientPort, _ := net.SplitHostPort(c.LocalAddr().String())
	nft("add table inet pft; add chain inet pft out { type filter hook output priority 0; }")
	for _, port := range []string{echoPort, clientPort} {
		nft("add rule inet pft out udp dport " + port + " drop")
		dropped := a.counters.DroppedDatagrams.Load() + b.counters.DroppedDatagrams.Load()
		testutil.Eventually(t, 5*time.Second, func() error {
			if _, err := c.Write([]byte("refused")); err != nil {
				return err
			}
			if now := a.counters.DroppedDatagrams.Load() + b.counters.DroppedDatagrams.Load(); now <= dropped {
				return fmt.Errorf("no refused send counted (dropped %d)", now)
			}
			return nil
		})
		nft("flush chain inet pft out")
		if again := udpAsk(t, c, "after "+port); again != from {
			t.Fatalf("the flow came from %s, then %s: refused sends ended it", from, again)
		}
	}
	t.Logf("dropped datagrams counted: server side %d, client side %d", a.counters.DroppedDatagrams.Load(), b.counters.DroppedDatagrams.Load())
}
