package admin

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/router"

	"peerdns/internal/certs"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// regenerate-ca that made and saved the new root but could not issue a
// leaf again from it answers 500, and still says the root changed
// (update-certs), so the panel shows the new root rather than the old.
func TestRegenerateCAHintsANewRootWhoseLeavesFailed(t *testing.T) {
	sys, quiet := quietSystem(t)
	dir := t.TempDir()
	// breakLeaves, when set, replaces DATA/ca/leaves with a file the next
	// time the CA reads its scope: regenerate-ca reads it just before it
	// makes the new root, so the root is saved and every leaf write then
	// fails (ENOTDIR), as a failing disk would make it fail.
	var breakLeaves atomic.Bool
	ca, err := certs.OpenScoped(dir, nil, func() certs.Scope {
		if breakLeaves.CompareAndSwap(true, false) {
			leaves := filepath.Join(dir, "leaves")
			if err := os.RemoveAll(leaves); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(leaves, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
		return certs.Scope{Suffixes: []string{"p2p"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	var hints atomic.Int64
	sub := sys.EventStream.Subscribe(func(evt any) {
		if h, ok := evt.(*messages.Hint); ok && h.Type == messages.HintCerts {
			hints.Add(1)
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(sub) })
	addr := serveAdmin(t, Deps{Root: sys.Root, Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet,
		Register: []func(*router.Router){func(r *router.Router) {
			RegisterCerts(r, CertDeps{CA: ca, IP: func(string) netip.Addr { return netip.Addr{} }, Root: sys.Root, Log: quiet})
		}}})

	if code, body := testutil.Call(t, "POST", "http://"+addr+"/api/generate-cert", `{"domain":"a.p2p"}`); code != 200 {
		t.Fatalf("generate-cert a.p2p = %d %s", code, body)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if hints.Load() != 1 {
			return errors.New("no update-certs after generate-cert")
		}
		return nil
	})
	old := ca.Root()
	breakLeaves.Store(true)
	code, body := testutil.Call(t, "POST", "http://"+addr+"/api/regenerate-ca", "")
	if ca.Root() == old {
		t.Fatalf("regenerate-ca = %d %s, and the root did not change: the test did not break what it meant to", code, body)
	}
	testutil.Eventually(t, 2*time.Second, func() error {
		if n := hints.Load(); n != 2 {
			return errors.New("no update-certs after regenerate-ca changed the root")
		}
		return nil
	})
	if code != 500 || !strings.Contains(body, "new root is in place") {
		t.Fatalf("regenerate-ca with leaves that cannot be saved = %d %q, want 500 saying the new root is in place", code, body)
	}
}
