package connshare

import (
	"net"
	"sync"
	"testing"
)

func TestShare(t *testing.T) {
	for _, c := range []struct{ max, want int }{{4096, 256}, {1024, 256}, {64, 16}, {3, 1}, {0, 1}} {
		if got := Share(c.max); got != c.want {
			t.Errorf("Share(%d) = %d, want %d", c.max, got, c.want)
		}
	}
}

// A share given is kept within the cap.
func TestGivenShare(t *testing.T) {
	for _, c := range []struct{ max, per, want int }{{4096, 0, 256}, {4096, 1000, 1000}, {64, 1000, 64}, {64, 3, 3}} {
		if got := New(c.max, c.per, false).PerAddr(); got != c.want {
			t.Errorf("New(%d, %d).PerAddr() = %d, want %d", c.max, c.per, got, c.want)
		}
	}
}

func tcp(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }

func TestKey(t *testing.T) {
	c := New(8, 0, false)
	key := func(c *Counter, a net.Addr) string {
		k, ok := c.Key(a)
		if !ok {
			return "-"
		}
		return k.String()
	}
	for ip, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"::ffff:192.0.2.7":     "192.0.2.7",
		"2001:db8:1:2:aaaa::1": "2001:db8:1:2::",
		"2001:db8:1:2:bbbb::9": "2001:db8:1:2::",
		"2001:db8:1:3::1":      "2001:db8:1:3::",
		"127.0.0.1":            "-",
		"127.1.2.3":            "-",
		"::1":                  "-",
	} {
		if got := key(c, tcp(ip)); got != want {
			t.Errorf("Key(%s) = %s, want %s", ip, got, want)
		}
	}
	if got := key(c, &net.UDPAddr{IP: net.ParseIP("2001:db8:1:2::7"), Port: 443}); got != "2001:db8:1:2::" {
		t.Errorf("Key(a UDP address) = %s, want 2001:db8:1:2::", got)
	}
	if got := key(c, &net.UnixAddr{Name: "/run/x.sock", Net: "unix"}); got != "-" {
		t.Errorf("Key(a Unix socket) = %s, want not counted", got)
	}
	if got := key(New(8, 0, true), tcp("127.0.0.1")); got != "127.0.0.1" {
		t.Errorf("counting loopback: Key(127.0.0.1) = %s", got)
	}
}

// TestEnterLeave: an address holds its share and no more, a /64 is one
// address, other addresses and loopback are not held back, and a place
// given back is free again.
func TestEnterLeave(t *testing.T) {
	c := New(8, 0, false) // a share of 2
	var held []Place
	for _, ip := range []string{"192.0.2.7", "192.0.2.7", "2001:db8::1", "2001:db8::2"} {
		p, ok := c.Enter(tcp(ip))
		if !ok {
			t.Fatalf("%s refused within its share", ip)
		}
		held = append(held, p)
	}
	for _, ip := range []string{"192.0.2.7", "2001:db8::3"} {
		p, ok := c.Enter(tcp(ip))
		if ok {
			t.Fatalf("%s admitted over its share", ip)
		}
		if k, _ := c.Key(tcp(ip)); p.Addr() != k {
			t.Errorf("refused place names %s, want %s", p.Addr(), k)
		}
	}
	if c.Refused() != 2 {
		t.Errorf("Refused() = %d, want 2", c.Refused())
	}
	for range 10 {
		if _, ok := c.Enter(tcp("127.0.0.1")); !ok {
			t.Fatal("loopback refused")
		}
	}
	if _, ok := c.Enter(tcp("198.51.100.1")); !ok {
		t.Fatal("another address refused")
	}
	c.Leave(held[0])
	c.Leave(Place{}) // not counted: nothing
	if _, ok := c.Enter(tcp("192.0.2.7")); !ok {
		t.Fatal("a place given back is not free")
	}
	if _, ok := c.Enter(tcp("192.0.2.7")); ok {
		t.Fatal("the address holds its share again, yet was admitted")
	}
}

// TestConcurrentEnterLeave: places entered and left from many goroutines
// leave nothing counted.
func TestConcurrentEnterLeave(t *testing.T) {
	c := New(64, 0, false) // a share of 16
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := tcp([]string{"192.0.2.1", "192.0.2.2"}[g%2])
			for range 1000 {
				if p, ok := c.Enter(a); ok {
					c.Leave(p)
				}
			}
		}()
	}
	wg.Wait()
	if len(c.by) != 0 || c.Refused() != 0 {
		t.Fatalf("after every place was given back: %d addresses counted, %d refused", len(c.by), c.Refused())
	}
}

// BenchmarkEnterLeave: a connection's place taken and given back, from
// every P at once, over 1,024 client addresses.
func BenchmarkEnterLeave(b *testing.B) {
	c := New(1<<20, 0, false)
	addrs := make([]net.Addr, 1024) // 256 IPv4 clients, 768 IPv6 /64s
	for i := range addrs {
		ip := net.IP{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(i >> 8), byte(i), 0, 0, 0, 0, 0, 0, 0, 1}
		if i < 256 {
			ip = net.IPv4(192, 0, 2, byte(i))
		}
		addrs[i] = &net.TCPAddr{IP: ip, Port: 40000}
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if p, ok := c.Enter(addrs[i%len(addrs)]); ok {
				c.Leave(p)
			}
			i++
		}
	})
}

// Admit takes a place and a slot, or neither: over the share and at the
// cap are refused and counted apart, and what is given back can be
// taken again.
func TestLimiterAdmit(t *testing.T) {
	l := NewLimiter(3, 2, true)
	a, b := tcp("192.0.2.1"), tcp("192.0.2.2")
	var held []Place
	for _, from := range []net.Addr{a, a, b} {
		p, atCap, ok := l.Admit(from)
		if !ok || atCap {
			t.Fatalf("admit %v with room: ok %v atCap %v", from, ok, atCap)
		}
		held = append(held, p)
	}
	if p, atCap, ok := l.Admit(a); ok || atCap || p.Addr().String() != "192.0.2.1" {
		t.Fatalf("a third from one address, share 2: ok %v atCap %v addr %v; want refused over its share", ok, atCap, p.Addr())
	}
	if _, atCap, ok := l.Admit(tcp("192.0.2.3")); ok || !atCap {
		t.Fatalf("a fourth connection, cap 3: ok %v atCap %v; want refused at the cap", ok, atCap)
	}
	if l.Refused() != 1 || l.AtCap() != 1 || l.Held() != 3 {
		t.Fatalf("refused %d, at cap %d, held %d; want 1, 1, 3", l.Refused(), l.AtCap(), l.Held())
	}
	// The refusal at the cap gave its address's place back.
	if p, ok := l.Enter(tcp("192.0.2.3")); !ok {
		t.Fatal("an address refused at the cap kept a place")
	} else {
		l.Leave(p)
	}
	l.Leave(held[0])
	l.Give()
	if _, _, ok := l.Admit(a); !ok {
		t.Fatal("a place and a slot given back were not taken again")
	}
}

// Take waits for a slot and returns once one is given back, or false
// once its stop is closed; TryTake does not wait.
func TestLimiterTake(t *testing.T) {
	l := NewLimiter(1, 0, false)
	if !l.TryTake() || l.TryTake() {
		t.Fatal("TryTake: want one slot of one, then none")
	}
	got := make(chan bool)
	go func() { got <- l.Take(make(chan struct{})) }()
	l.Give()
	if !<-got {
		t.Fatal("Take did not take the slot given back")
	}
	stop := make(chan struct{})
	go func() { got <- l.Take(stop) }()
	close(stop)
	if <-got {
		t.Fatal("Take took a slot with none free")
	}
	if l.Max() != 1 || l.Held() != 1 {
		t.Fatalf("max %d, held %d; want 1 and 1", l.Max(), l.Held())
	}
}
