package ipam

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"peerdns/messages"
)

func TestAssignStableAndRelease(t *testing.T) {
	subs, err := DefaultSubnets("", 0)
	if err != nil {
		t.Fatal(err)
	}
	p := New(subs, nil)
	a, fresh, err := p.Assign("a.p2p")
	if err != nil || !fresh || a != netip.MustParseAddr("127.77.0.2") {
		t.Fatalf("Assign(a.p2p) = %v %v %v", a, fresh, err)
	}
	again, fresh, _ := p.Assign("a.p2p")
	if again != a || fresh {
		t.Fatalf("second Assign = %v fresh %v, want %v stable", again, fresh, a)
	}
	b, _, _ := p.Assign("b.p2p")
	if b != netip.MustParseAddr("127.77.0.3") {
		t.Fatalf("Assign(b.p2p) = %v", b)
	}
	p.Release("a.p2p")
	c, _, _ := p.Assign("c.p2p")
	if c != a {
		t.Fatalf("freed address not reused: %v", c)
	}
	d := p.Describe()
	if d[0].Used != 2 || d[0].Available != 65536-1-2 || d[0].Remaining != d[0].Available-2 {
		t.Fatalf("Describe = %+v", d[0])
	}
}

func TestPoolExhausted(t *testing.T) {
	p := New([]Subnet{{Base: netip.MustParseAddr("10.0.0.0"), CIDR: 30, StartIndex: 1}}, nil)
	for _, d := range []string{"a", "b"} {
		if _, _, err := p.Assign(d); err != nil {
			t.Fatalf("Assign(%s) = %v", d, err)
		}
	}
	if _, _, err := p.Assign("c"); err == nil {
		t.Fatal("Assign on a full /30 succeeded")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		in   []messages.Subnet
		want string // substring of the first error, "" for valid
	}{
		{"valid", []messages.Subnet{{Base: "127.80.0.0", CIDR: 24, StartIndex: 1}}, ""},
		{"empty", nil, "at least one"},
		{"bad base", []messages.Subnet{{Base: "300.1.1.1", CIDR: 24, StartIndex: 1}}, "not a valid IPv4"},
		{"ipv6 base", []messages.Subnet{{Base: "::1", CIDR: 24, StartIndex: 1}}, "not a valid IPv4"},
		{"cidr 0", []messages.Subnet{{Base: "10.0.0.0", CIDR: 0, StartIndex: 1}}, "between 1 and 32"},
		{"cidr 33", []messages.Subnet{{Base: "10.0.0.0", CIDR: 33, StartIndex: 1}}, "between 1 and 32"},
		{"start 0", []messages.Subnet{{Base: "10.0.0.0", CIDR: 24, StartIndex: 0}}, "startIndex 0"},
		{"start 255 on /24", []messages.Subnet{{Base: "10.0.0.0", CIDR: 24, StartIndex: 255}}, "between 1 and 254"},
		{"start 1000 on /16 ok", []messages.Subnet{{Base: "10.0.0.0", CIDR: 16, StartIndex: 1000}}, ""},
		{"/32 unusable", []messages.Subnet{{Base: "10.0.0.1", CIDR: 32, StartIndex: 1}}, "no usable"},
		{"overlap", []messages.Subnet{{Base: "10.0.0.0", CIDR: 16, StartIndex: 1}, {Base: "10.0.5.0", CIDR: 24, StartIndex: 1}}, "overlaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs := Validate(tt.in)
			if tt.want == "" {
				if len(errs) != 0 {
					t.Fatalf("Validate = %v, want valid", errs)
				}
				if out[0].Name != "Subnet 1" {
					t.Fatalf("default name = %q", out[0].Name)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs[0], tt.want) {
				t.Fatalf("Validate errors = %v, want one containing %q", errs, tt.want)
			}
		})
	}
}

func BenchmarkAssign10k(b *testing.B) {
	subs, _ := DefaultSubnets("", 0)
	for i := 0; i < b.N; i++ {
		p := New(subs, nil)
		for d := 0; d < 10000; d++ {
			if _, _, err := p.Assign(fmt.Sprint(d)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// An address below StartIndex that a domain kept from an earlier subnet
// setting is not handed out again once released: the operator reserved
// the addresses below StartIndex.
func TestReleasedAddressBelowStartIndexStaysReserved(t *testing.T) {
	subs := []Subnet{{Base: netip.MustParseAddr("127.77.0.0"), CIDR: 16, StartIndex: 10}}
	p := New(subs, map[string]netip.Addr{"old.p2p": netip.MustParseAddr("127.77.0.2")})
	p.Release("old.p2p")
	ip, fresh, err := p.Assign("new.p2p")
	if err != nil || !fresh {
		t.Fatalf("Assign(new.p2p) = %v %v %v", ip, fresh, err)
	}
	if want := netip.MustParseAddr("127.77.0.10"); ip != want {
		t.Fatalf("Assign(new.p2p) = %v, want %v (the first address from StartIndex)", ip, want)
	}
}

// SUBNET_BASE and INITIAL_IP_INDEX follow the subnet rules of Validate:
// a prefix with no usable address, or a first index past its end, is
// refused rather than leaving every domain without an address; a /0
// (cidr outside 1 to 32) too, which handed out 0.0.0.2 on and was listed
// by GET /api/subnets as a subnet POST /api/subnets refuses.
func TestDefaultSubnetsNeedAnAddress(t *testing.T) {
	for _, tt := range []struct {
		base  string
		start int
	}{
		{"10.0.0.1/32", 0},
		{"10.0.0.0/31", 0},
		{"10.0.0.0/30", 3},
		{"10.0.0.0/24", 300},
		{"10.0.0.0/0", 0},
	} {
		if subs, err := DefaultSubnets(tt.base, tt.start); err == nil {
			t.Errorf("DefaultSubnets(%q, %d) = %+v, want an error", tt.base, tt.start, subs)
		}
	}
	for _, tt := range []struct {
		base  string
		start int
	}{
		{"", 0},
		{"10.0.0.0/30", 2},
		{"10.0.0.0/24", 254},
		{"127.88.0.0", 5},
	} {
		subs, err := DefaultSubnets(tt.base, tt.start)
		if err != nil {
			t.Errorf("DefaultSubnets(%q, %d): %v", tt.base, tt.start, err)
			continue
		}
		if _, _, err := New(subs, nil).Assign("a.p2p"); err != nil {
			t.Errorf("DefaultSubnets(%q, %d): Assign: %v", tt.base, tt.start, err)
		}
		if _, errs := Validate(New(subs, nil).Describe()); len(errs) > 0 {
			t.Errorf("DefaultSubnets(%q, %d): its subnet does not validate: %v", tt.base, tt.start, errs)
		}
	}
}

// Describe's counts are of the addresses the subnet hands out: a domain
// that kept an address below StartIndex (from an earlier setting) does
// not use one of them. It was counted, so remaining was too low and went
// negative while Assign still had every address to give.
func TestDescribeCountsOnlyTheHandedOutRange(t *testing.T) {
	subs := []Subnet{{Base: netip.MustParseAddr("10.0.0.0"), CIDR: 29, StartIndex: 5}} // hands out .5 and .6
	p := New(subs, map[string]netip.Addr{
		"a.p2p": netip.MustParseAddr("10.0.0.1"),
		"b.p2p": netip.MustParseAddr("10.0.0.2"),
		"c.p2p": netip.MustParseAddr("10.0.0.3"),
	})
	d := p.Describe()[0]
	if d.Available != 2 || d.Used != 0 || d.Remaining != 2 {
		t.Fatalf("Describe = available %d used %d remaining %d, want 2 0 2", d.Available, d.Used, d.Remaining)
	}
	for _, name := range []string{"x.p2p", "y.p2p"} {
		if _, _, err := p.Assign(name); err != nil {
			t.Fatalf("Assign(%s) with %d remaining: %v", name, d.Remaining, err)
		}
	}
	if _, _, err := p.Assign("z.p2p"); err == nil {
		t.Fatal("Assign past the range succeeded")
	}
	if d := p.Describe()[0]; d.Used != 2 || d.Remaining != 0 {
		t.Fatalf("Describe when full = used %d remaining %d, want 2 0", d.Used, d.Remaining)
	}
}
