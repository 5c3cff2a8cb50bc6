package transport

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peerdns/internal/store"
	"peerdns/transport/identity"
)

func newTestBook(t *testing.T) *InviteBook {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewInviteBook(db)
}

func TestInviteEncodeParseVerify(t *testing.T) {
	inviter, _ := identity.Generate()
	now := time.Unix(1_700_000_000, 0)
	inv, err := NewInvite(inviter, "netkey", inviter.ID(), []string{"127.0.0.1:7740"}, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.UnixMilli(inv.ExpiresAt).Sub(now); got != DefaultInviteTTL {
		t.Fatalf("default ttl = %v, want %v", got, DefaultInviteTTL)
	}
	s, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(s, "+/= \n") {
		t.Fatalf("invite %q is not copy-paste safe base64url", s)
	}
	got, err := ParseInvite("  " + s + "\n")
	if err != nil {
		t.Fatalf("ParseInvite: %v", err)
	}
	if got.Network != "netkey" || got.Inviter != inviter.ID() || got.Addrs[0] != "127.0.0.1:7740" || got.Nonce != inv.Nonce {
		t.Fatalf("ParseInvite = %+v, want %+v", got, inv)
	}
	if err := got.Verify(now.Add(time.Hour)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := got.Verify(now.Add(DefaultInviteTTL)); !errors.Is(err, ErrInviteExpired) {
		t.Fatalf("Verify after expiry = %v, want ErrInviteExpired", err)
	}
}

func TestParseInviteRejects(t *testing.T) {
	inviter, _ := identity.Generate()
	other, _ := identity.Generate()
	now := time.Now()
	good, _ := NewInvite(inviter, "netkey", inviter.ID(), nil, time.Hour, now)
	enc := func(i *Invite) string {
		s, err := i.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tampered := *good
	tampered.Addrs = []string{"10.0.0.1:1"}
	forged := *good
	forged.Inviter = other.ID()
	unsigned := *good
	unsigned.Sig = nil
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"not base64", "!!!"},
		{"not cbor", "aGVsbG8"},
		{"tampered addrs", enc(&tampered)},
		{"inviter swapped", enc(&forged)},
		{"unsigned", enc(&unsigned)},
		{"too long", strings.Repeat("A", maxInviteLen+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseInvite(tt.in); !errors.Is(err, ErrInviteInvalid) {
				t.Fatalf("ParseInvite(%s) = %v, want ErrInviteInvalid", tt.name, err)
			}
		})
	}
	if _, err := NewInvite(inviter, "", "", nil, 0, now); err == nil {
		t.Fatal("NewInvite without network succeeded")
	}
	if _, err := NewInvite(inviter, "k", inviter.ID(), nil, MaxInviteTTL+time.Second, now); err == nil {
		t.Fatal("NewInvite with ttl over max succeeded")
	}
}

func TestJoinProof(t *testing.T) {
	inviter, _ := identity.Generate()
	joiner, _ := identity.Generate()
	thief, _ := identity.Generate()
	inv, _ := NewInvite(inviter, "k", inviter.ID(), nil, time.Hour, time.Now())
	req, err := inv.JoinRequest(joiner)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseInvite(req.Invite)
	if err != nil {
		t.Fatal(err)
	}
	if !parsed.CheckProof(joiner.ID(), req.Proof) {
		t.Fatal("valid proof rejected")
	}
	if parsed.CheckProof(thief.ID(), req.Proof) {
		t.Fatal("proof accepted for another key")
	}
}

func TestInviteBookOneTime(t *testing.T) {
	inviter, _ := identity.Generate()
	j1, _ := identity.Generate()
	j2, _ := identity.Generate()
	now := time.Now()
	book := newTestBook(t)
	inv, _ := NewInvite(inviter, "k", inviter.ID(), nil, time.Hour, now)
	if err := book.Redeem(inv, j1.ID(), now); !errors.Is(err, ErrInviteUnknown) {
		t.Fatalf("Redeem before Issue = %v, want ErrInviteUnknown", err)
	}
	if err := book.Issue(inv); err != nil {
		t.Fatal(err)
	}
	if err := book.Redeem(inv, j1.ID(), now); err != nil {
		t.Fatalf("first Redeem: %v", err)
	}
	if err := book.Redeem(inv, j1.ID(), now); err != nil {
		t.Fatalf("same joiner again: %v", err)
	}
	if err := book.Redeem(inv, j2.ID(), now); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("second joiner = %v, want ErrInviteUsed", err)
	}
	// Release (admission failed) frees it for another try.
	if err := book.Release(inv, j1.ID()); err != nil {
		t.Fatal(err)
	}
	if err := book.Redeem(inv, j2.ID(), now); err != nil {
		t.Fatalf("after Release: %v", err)
	}
	expired, _ := NewInvite(inviter, "k", inviter.ID(), nil, time.Minute, now)
	book.Issue(expired)
	if err := book.Redeem(expired, j1.ID(), now.Add(2*time.Minute)); !errors.Is(err, ErrInviteExpired) {
		t.Fatalf("expired Redeem = %v, want ErrInviteExpired", err)
	}
}

// A joiner whose accept was lost with the connection dials again with
// the same invite; by then the invite may have expired. It is already
// the invite's holder (and a writer): the retry is admitted, while
// another key is still refused.
func TestInviteBookSameJoinerAfterExpiry(t *testing.T) {
	inviter, _ := identity.Generate()
	j1, _ := identity.Generate()
	j2, _ := identity.Generate()
	now := time.Now()
	book := newTestBook(t)
	inv, _ := NewInvite(inviter, "k", inviter.ID(), nil, time.Minute, now)
	if err := book.Issue(inv); err != nil {
		t.Fatal(err)
	}
	if err := book.Redeem(inv, j1.ID(), now.Add(59*time.Second)); err != nil {
		t.Fatalf("Redeem before expiry: %v", err)
	}
	later := now.Add(2 * time.Minute)
	if err := book.Redeem(inv, j1.ID(), later); err != nil {
		t.Fatalf("same joiner again after expiry = %v, want nil", err)
	}
	if err := book.Redeem(inv, j2.ID(), later); !errors.Is(err, ErrInviteExpired) {
		t.Fatalf("another joiner after expiry = %v, want ErrInviteExpired", err)
	}
	if err := book.Release(inv, j1.ID()); err != nil {
		t.Fatal(err)
	}
	if err := book.Redeem(inv, j1.ID(), later); !errors.Is(err, ErrInviteExpired) {
		t.Fatalf("released invite after expiry = %v, want ErrInviteExpired", err)
	}
}

func TestInviteBookSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	inviter, _ := identity.Generate()
	j1, _ := identity.Generate()
	j2, _ := identity.Generate()
	inv, _ := NewInvite(inviter, "k", inviter.ID(), nil, time.Hour, time.Now())
	db, err := store.Open(path, store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	b := NewInviteBook(db)
	b.Issue(inv)
	if err := b.Redeem(inv, j1.ID(), time.Now()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = store.Open(path, store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := NewInviteBook(db).Redeem(inv, j2.ID(), time.Now()); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("Redeem after restart = %v, want ErrInviteUsed", err)
	}
}

func FuzzParseInvite(f *testing.F) {
	inviter, _ := identity.Generate()
	inv, _ := NewInvite(inviter, "k", inviter.ID(), []string{"127.0.0.1:1"}, time.Hour, time.Now())
	s, _ := inv.Encode()
	for _, seed := range []string{s, "", "!!!", "aGVsbG8", s[:len(s)/2]} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseInvite(in)
		if err != nil {
			return
		}
		if _, err := got.Encode(); err != nil {
			t.Fatalf("parsed invite does not encode: %v", err)
		}
	})
}
