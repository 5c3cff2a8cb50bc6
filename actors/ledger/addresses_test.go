package ledger

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

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
