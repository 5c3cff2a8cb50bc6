package vif

import (
	"errors"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
)

// fakeSystem records what the manager asks of the machine; fail makes
// every call fail with that error. The real netlink calls are exercised
// by the network namespace test in cmd/peerdns (TestVirtualInterfaceLAN).
type fakeSystem struct {
	up    bool
	addrs map[netip.Addr]bool
	fail  error
	calls []string
}

func (f *fakeSystem) ensure(string) (bool, error) {
	f.calls = append(f.calls, "ensure")
	if f.fail != nil {
		return false, f.fail
	}
	made := !f.up
	f.up = true
	return made, nil
}

func (f *fakeSystem) listAddrs(string) ([]netip.Addr, error) {
	return sorted(f.addrs), nil
}

func (f *fakeSystem) add(_ string, a netip.Addr) error {
	f.calls = append(f.calls, "add "+a.String())
	if f.fail != nil {
		return f.fail
	}
	if !f.up {
		return errors.New("Link not found")
	}
	f.addrs[a] = true
	return nil
}

func (f *fakeSystem) del(_ string, a netip.Addr) error {
	f.calls = append(f.calls, "del "+a.String())
	delete(f.addrs, a)
	return nil
}

func (f *fakeSystem) remove(string, []netip.Addr) error {
	f.calls = append(f.calls, "remove")
	f.up, f.addrs = false, map[netip.Addr]bool{}
	return nil
}

func newFake() (*Manager, *fakeSystem) {
	f := &fakeSystem{addrs: map[netip.Addr]bool{}}
	m := New(Config{})
	m.sys = f
	return m, f
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestSyncAddsAndRemoves(t *testing.T) {
	m, f := newFake()
	if err := m.Sync(addrs("127.77.0.2", "127.77.0.3")); err != nil || len(f.calls) != 0 {
		t.Fatalf("loopback only: %v, calls %v (want none)", err, f.calls)
	}
	if err := m.Sync(addrs("127.77.0.2", "198.51.100.10", "198.51.100.11")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ensure", "add 198.51.100.10", "add 198.51.100.11"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls %v, want %v", f.calls, want)
	}
	f.calls = nil
	if err := m.Sync(addrs("198.51.100.11")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ensure", "del 198.51.100.10"}; !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls %v, want %v", f.calls, want)
	}
	st := m.Status()
	if st.Name != DefaultName || !st.Up || !reflect.DeepEqual(st.Addrs, addrs("198.51.100.11")) || st.Error != "" {
		t.Fatalf("Status = %+v", st)
	}
	if err := m.Explain(netip.MustParseAddr("198.51.100.11")); err != nil {
		t.Fatalf("Explain of an address on the link: %v", err)
	}
	if err := m.Explain(netip.MustParseAddr("198.51.100.12")); err == nil || !strings.Contains(err.Error(), "not on interface peerdns0 yet") {
		t.Fatalf("Explain of a missing address: %v", err)
	}
	f.calls = nil
	if err := m.Close(); err != nil || !reflect.DeepEqual(f.calls, []string{"remove"}) {
		t.Fatalf("Close: %v, calls %v", err, f.calls)
	}
	f.calls = nil
	if err := m.Sync(addrs("198.51.100.13")); err != nil || len(f.calls) != 0 {
		t.Fatalf("Sync after Close: %v, calls %v", err, f.calls)
	}
}

// Without the privilege (CAP_NET_ADMIN on Linux, root on macOS) the
// failure is kept and explained with the command that grants it.
func TestSyncWithoutPrivilege(t *testing.T) {
	m, f := newFake()
	f.fail = &os.SyscallError{Syscall: "netlink", Err: os.ErrPermission}
	err := m.Sync(addrs("198.51.100.10"))
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), privilegeAdvice) || !strings.Contains(err.Error(), FixCommand) {
		t.Fatalf("Sync without privilege: %v", err)
	}
	why := m.Explain(netip.MustParseAddr("198.51.100.10"))
	if why == nil || !strings.Contains(why.Error(), FixCommand) {
		t.Fatalf("Explain: %v", why)
	}
	if m.Explain(netip.MustParseAddr("127.77.0.2")) != nil {
		t.Fatal("a loopback address needs no interface")
	}
	if st := m.Status(); st.Up || st.Error == "" {
		t.Fatalf("Status = %+v", st)
	}
	f.fail = nil
	if err := m.Sync(addrs("198.51.100.10")); err != nil || m.Status().Error != "" {
		t.Fatalf("after the privilege was granted: %v %+v", err, m.Status())
	}
}

func TestNeeds(t *testing.T) {
	for s, want := range map[string]bool{"127.77.0.2": false, "::1": false, "198.51.100.10": true, "0.0.0.0": false, "::ffff:127.0.0.1": false} {
		if got := Needs(netip.MustParseAddr(s)); got != want {
			t.Errorf("Needs(%s) = %v, want %v", s, got, want)
		}
	}
	if Needs(netip.Addr{}) {
		t.Error("Needs(invalid) = true")
	}
}

// A link left by a node that crashed is adopted with its addresses: those
// not wanted any more are taken off. They stayed on it for good, still
// answered by the host though no domain had them.
func TestSyncTakesOffAddressesLeftOnAnAdoptedLink(t *testing.T) {
	m, f := newFake()
	f.up = true
	f.addrs[netip.MustParseAddr("198.51.100.9")] = true  // a domain released while the node was down
	f.addrs[netip.MustParseAddr("198.51.100.10")] = true // still wanted
	if err := m.Sync(addrs("198.51.100.10", "198.51.100.11")); err != nil {
		t.Fatal(err)
	}
	if want := addrs("198.51.100.10", "198.51.100.11"); !reflect.DeepEqual(sorted(f.addrs), want) || !reflect.DeepEqual(m.Status().Addrs, want) {
		t.Fatalf("on the link %v, status %v, want %v", sorted(f.addrs), m.Status().Addrs, want)
	}
}

// A link deleted from outside while up (ip link del) is made again with
// its addresses at the next Sync. Sync went on adding to a link that was
// gone and believed the old addresses still on it.
func TestSyncRemakesALinkDeletedFromOutside(t *testing.T) {
	m, f := newFake()
	want := addrs("198.51.100.10", "198.51.100.11")
	if err := m.Sync(want); err != nil {
		t.Fatal(err)
	}
	f.up, f.addrs = false, map[netip.Addr]bool{} // deleted, its addresses with it
	if err := m.Sync(append(want, netip.MustParseAddr("198.51.100.12"))); err != nil {
		t.Fatalf("Sync after the link was deleted: %v", err)
	}
	want = append(want, netip.MustParseAddr("198.51.100.12"))
	if !f.up || !reflect.DeepEqual(sorted(f.addrs), want) || !reflect.DeepEqual(m.Status().Addrs, want) {
		t.Fatalf("link up %v with %v, status %v, want up with %v", f.up, sorted(f.addrs), m.Status().Addrs, want)
	}
}
