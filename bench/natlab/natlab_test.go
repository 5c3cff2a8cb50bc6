//go:build linux

package natlab

import (
	"fmt"
	"os"
	"testing"
)

// TestNATLab runs every scenario once with real `peerdns node` processes
// behind nftables routers: the pair connects within its bound, by the
// path it should, a tunnel carries data, and (eim-eim) the pair stays
// connected after the peer that introduced it stops. A scenario whose
// Want is "any" (a symmetric NAT) needs the relayed or TCP path; it is
// checked for a punch attempt and its outcome logged.
func TestNATLab(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("-short: the NAT lab starts nine node processes (about a minute)")
	}
	bin, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			prefix := fmt.Sprintf("pra-%d%d", os.Getpid()%10000, i)
			res, err := Run(bin, prefix, t.TempDir(), sc, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: connected=%v path=%q (first %q) via=%.12s join→connected=%v first byte=%v punches=%d survived introducer=%v nat X=%s Y=%s",
				sc.Name, res.Connected, res.Path, res.FirstPath, res.Via, res.JoinToConnected, res.FirstByte, res.Punches, res.SurvivedIntroducer, res.NATX, res.NATY)
			if res.NATX != WantNAT(sc.X) || res.NATY != WantNAT(sc.Y) {
				t.Errorf("NAT kinds reported: X (%s) %q, Y (%s) %q; want %q and %q", sc.X, res.NATX, sc.Y, res.NATY, WantNAT(sc.X), WantNAT(sc.Y))
			}
			if sc.Want == "any" && !res.Connected {
				// Without a relayed or TCP path this pair cannot connect;
				// the nodes must still have tried to punch.
				if res.Punches == 0 {
					t.Fatalf("not connected and no punch attempted: %v", res.Err)
				}
				t.Logf("not connected by punching (%v): this pair needs the relayed path", res.Err)
				return
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if sc.StopIntroducer && !res.SurvivedIntroducer {
				t.Fatal("did not survive the introducer stopping")
			}
		})
	}
}
