package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"peerdns/internal/ipam"
	"peerdns/internal/store"
	"peerdns/messages"
)

func openNodeDB(t *testing.T, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "node.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// The address owner on a real node.db: addresses survive a reopen once
// persisted, the same domain keeps its address, a cleanup releases the
// unclaimed ones (on disk too), and bad subnets are refused.
func TestAddresses(t *testing.T) {
	dir := t.TempDir()
	db := openNodeDB(t, dir)
	ad, err := loadAddresses(db, slog.Default(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !ad.assign("a.p2p") || !ad.assign("b.p2p") {
		t.Fatal("first assignments are not fresh")
	}
	if ad.assign("a.p2p") {
		t.Fatal("a second assignment of a.p2p is fresh")
	}
	if !ad.persist() || ad.persist() {
		t.Fatal("persist: want true once, then false with nothing new")
	}
	ipA, _ := ad.lookup("a.p2p")
	ipB, _ := ad.lookup("b.p2p")
	if !ipA.IsValid() || ipA == ipB {
		t.Fatalf("addresses a=%v b=%v", ipA, ipB)
	}
	db.Close()

	db = openNodeDB(t, dir)
	defer db.Close()
	ad, err = loadAddresses(db, slog.Default(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := ad.lookup("a.p2p"); !ok || got != ipA {
		t.Fatalf("after reopen a.p2p = %v %v, want %v", got, ok, ipA)
	}
	n, err := ad.cleanup(func(name string) bool { return name == "a.p2p" })
	if err != nil || n != 1 {
		t.Fatalf("cleanup: %d %v, want 1 released", n, err)
	}
	if _, ok := ad.lookup("b.p2p"); ok {
		t.Fatal("b.p2p kept its address after the cleanup")
	}
	if _, err := db.Get(ipPrefix + "b.p2p"); err == nil {
		t.Fatal("b.p2p's address is still in node.db")
	}
	if len(ad.assignments()) != 1 {
		t.Fatalf("assignments %+v, want a.p2p only", ad.assignments())
	}

	if err := ad.setSubnets([]messages.Subnet{{Base: "not-an-ip", CIDR: 24}}); !errors.Is(err, messages.ErrInvalid) {
		t.Fatalf("bad subnet: %v, want ErrInvalid", err)
	}
	if err := ad.setSubnets([]messages.Subnet{{Base: "10.77.0.0", CIDR: 24, StartIndex: 1, Name: "lab"}}); err != nil {
		t.Fatal(err)
	}
	desc := ad.describe()
	if len(desc) != 1 || desc[0].Name != "lab" {
		t.Fatalf("describe after setSubnets: %+v", desc)
	}
}

// describe keeps its usage counts as assignments come and go, and
// answers what a pool built from every current assignment on the
// configured subnets describes: after fresh assignments, after the
// configured subnets change (to ones holding some of the addresses, and
// to two), after a cleanup, and after assignments that follow it.
func TestAddressesDescribeCounts(t *testing.T) {
	db := openNodeDB(t, t.TempDir())
	defer db.Close()
	ad, err := loadAddresses(db, slog.Default(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		subs, err := ad.subnets()
		if err != nil {
			t.Fatal(err)
		}
		assigned := map[string]netip.Addr{}
		for _, it := range ad.assignments() {
			assigned[it.Domain] = netip.MustParseAddr(it.IP)
		}
		want := ipam.New(subs, assigned).Describe()
		if got := ad.describe(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: describe %+v, want %+v", step, got, want)
		}
	}
	assign := func(from, to int) {
		for i := from; i < to; i++ {
			ad.assign(fmt.Sprintf("d%d.p2p", i))
		}
	}
	check("empty")
	assign(0, 300)
	check("300 assigned")
	assign(300, 310)
	ad.assign("d5.p2p") // not fresh
	check("310 assigned")
	first, _ := ad.lookup("d0.p2p")
	base := netip.PrefixFrom(first, 24).Masked().Addr().String()
	if err := ad.setSubnets([]messages.Subnet{{Base: base, CIDR: 24, StartIndex: 1, Name: "holds some"}}); err != nil {
		t.Fatal(err)
	}
	check("subnets changed")
	assign(310, 320)
	check("assigned after the change")
	if err := ad.setSubnets([]messages.Subnet{
		{Base: base, CIDR: 24, StartIndex: 1, Name: "one"},
		{Base: "10.77.0.0", CIDR: 24, StartIndex: 1, Name: "two"},
	}); err != nil {
		t.Fatal(err)
	}
	check("two subnets")
	if _, err := ad.cleanup(func(name string) bool { return !strings.HasSuffix(name, "3.p2p") }); err != nil {
		t.Fatal(err)
	}
	check("after a cleanup")
	assign(320, 340)
	check("assigned after the cleanup")
	// A StartIndex past every assigned address: they are kept, and none
	// of them uses an address the subnet hands out.
	if err := ad.setSubnets([]messages.Subnet{{Base: base, CIDR: 16, StartIndex: 1000, Name: "past them"}}); err != nil {
		t.Fatal(err)
	}
	check("start index past the assigned")
	if d := ad.describe()[0]; d.Used != 0 || d.Remaining != d.Available {
		t.Fatalf("start index past the assigned: used %d remaining %d of %d, want 0 and all", d.Used, d.Remaining, d.Available)
	}
}
