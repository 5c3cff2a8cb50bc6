package cookie

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The test vector of RFC 9018 Appendix A.1 (a server cookie another
// implementation made verifies here, and we make the same bytes).
func TestRFC9018Vector(t *testing.T) {
	j, err := New(mustHex(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"))
	if err != nil {
		t.Fatal(err)
	}
	var client [ClientLen]byte
	copy(client[:], mustHex(t, "2464c4abcf10c957"))
	ip := netip.MustParseAddr("198.51.100.100")
	now := time.Unix(1559731985, 0)
	var got [ServerLen]byte
	j.Make(&got, &client, ip, now)
	if want := "010000005cf79f111f8130c3eee29480"; hex.EncodeToString(got[:]) != want {
		t.Fatalf("Make = %x, want %s", got, want)
	}
	if !j.Valid(got[:], &client, ip, now.Add(10*time.Minute)) {
		t.Fatal("own cookie not valid")
	}
}

func TestValid(t *testing.T) {
	j, _ := New(nil)
	other, _ := New(nil)
	var client [ClientLen]byte
	copy(client[:], "abcdefgh")
	ip := netip.MustParseAddr("2001:db8::1")
	now := time.Unix(1_800_000_000, 0)
	var c [ServerLen]byte
	j.Make(&c, &client, ip, now)
	for _, tt := range []struct {
		name string
		jar  *Jar
		ip   string
		at   time.Duration
		mut  func(b []byte) []byte
		want bool
	}{
		{"fresh", j, "2001:db8::1", 0, nil, true},
		{"59 minutes old", j, "2001:db8::1", 59 * time.Minute, nil, true},
		{"61 minutes old", j, "2001:db8::1", 61 * time.Minute, nil, false},
		{"4 minutes ahead", j, "2001:db8::1", -4 * time.Minute, nil, true},
		{"6 minutes ahead", j, "2001:db8::1", -6 * time.Minute, nil, false},
		{"another address", j, "2001:db8::2", 0, nil, false},
		{"another server", other, "2001:db8::1", 0, nil, false},
		{"hash flipped", j, "2001:db8::1", 0, func(b []byte) []byte { b[15] ^= 1; return b }, false},
		{"version 2", j, "2001:db8::1", 0, func(b []byte) []byte { b[0] = 2; return b }, false},
		{"reserved set", j, "2001:db8::1", 0, func(b []byte) []byte { b[2] = 1; return b }, false},
		{"8 bytes", j, "2001:db8::1", 0, func(b []byte) []byte { return b[:8] }, false},
	} {
		b := append([]byte(nil), c[:]...)
		if tt.mut != nil {
			b = tt.mut(b)
		}
		if got := tt.jar.Valid(b, &client, netip.MustParseAddr(tt.ip), now.Add(tt.at)); got != tt.want {
			t.Errorf("%s: Valid = %v, want %v", tt.name, got, tt.want)
		}
	}
	// After a rotation the old secret's cookies still verify; after two
	// they do not.
	if err := j.Rotate(nil); err != nil {
		t.Fatal(err)
	}
	if !j.Valid(c[:], &client, ip, now) {
		t.Error("cookie of the previous secret refused after one rotation")
	}
	j.Rotate(nil)
	if j.Valid(c[:], &client, ip, now) {
		t.Error("cookie of a secret two rotations old accepted")
	}
	if err := j.Rotate([]byte("short")); err == nil {
		t.Error("Rotate accepted a 5-byte secret")
	}
}

func TestParse(t *testing.T) {
	for n := 0; n <= 48; n++ {
		_, server, err := Parse(make([]byte, n))
		ok := n == 8 || (n >= 16 && n <= 40)
		if (err == nil) != ok {
			t.Errorf("Parse(%d bytes) err = %v, want ok=%v", n, err, ok)
		}
		if ok && len(server) != n-8 {
			t.Errorf("Parse(%d bytes): server cookie %d bytes", n, len(server))
		}
	}
}

func TestAllocs(t *testing.T) {
	j, _ := New(nil)
	var client [ClientLen]byte
	var c [ServerLen]byte
	ip, now := netip.MustParseAddr("127.0.0.1"), time.Now()
	opt := make([]byte, 24)
	if a := testing.AllocsPerRun(1000, func() {
		cl, srv, _ := Parse(opt)
		j.Make(&c, &cl, ip, now)
		j.Valid(srv, &client, ip, now)
	}); a != 0 {
		t.Fatalf("%v allocations per cookie, want 0", a)
	}
}

// FuzzParse: any option data either parses into its two parts or is
// malformed, and a parsed server cookie checks without panicking.
func FuzzParse(f *testing.F) {
	j, _ := New(make([]byte, SecretLen))
	ip := netip.MustParseAddr("127.0.0.1")
	for _, s := range []string{"", "0102030405060708", "01020304050607080100000069d4a32aa1b2c3d4e5f60718", "0102030405060708ff"} {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, opt []byte) {
		client, server, err := Parse(opt)
		if err != nil {
			return
		}
		if string(client[:]) != string(opt[:ClientLen]) || len(server) != len(opt)-ClientLen {
			t.Fatalf("Parse(%x) = %x %x", opt, client, server)
		}
		now := time.Unix(1_775_000_000, 0)
		if j.Valid(server, &client, ip, now) {
			// Only a cookie this jar made verifies: remade, it is the same.
			var c [ServerLen]byte
			j.Make(&c, &client, ip, time.Unix(int64(binary.BigEndian.Uint32(server[4:])), 0))
			if string(c[:]) != string(server) {
				t.Fatalf("valid cookie %x is not ours (%x)", server, c)
			}
		}
	})
}

// A cookie made just before a rotation verifies throughout it: a reader
// sees the old secret as the current one or as the previous one, never
// the new secret beside the one before the old (Rotate installed the two
// in two steps, and a Valid between them refused a good cookie, which a
// client outside the ACL got as BADCOOKIE).
func TestRotateKeepsPreviousThroughout(t *testing.T) {
	j, _ := New(nil)
	var client [ClientLen]byte
	ip := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1_800_000_000, 0)
	type made struct {
		c [ServerLen]byte
		i int64 // made before rotation i
	}
	var latest atomic.Pointer[made]
	var started atomic.Int64 // rotations begun
	var refused atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			m := latest.Load()
			if m == nil {
				continue
			}
			// Made before rotation i, with the secret that was current:
			// good until rotation i+1 begins.
			if !j.Valid(m.c[:], &client, ip, now) && started.Load() <= m.i+1 {
				refused.Add(1)
				return
			}
		}
	}()
	key := make([]byte, SecretLen)
	for i := int64(0); i < 200_000 && refused.Load() == 0; i++ {
		m := &made{i: i}
		j.Make(&m.c, &client, ip, now)
		latest.Store(m)
		binary.BigEndian.PutUint64(key, uint64(i))
		started.Store(i + 1)
		if err := j.Rotate(key); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	if n := refused.Load(); n > 0 {
		t.Fatalf("a cookie made just before a rotation was refused during it")
	}
}
