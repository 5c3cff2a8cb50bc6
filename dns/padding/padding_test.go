package padding_test

import (
	"bytes"
	"net"
	"testing"

	"github.com/miekg/dns"

	"peerdns/dns/padding"
)

// FuzzPad: no message panics Pad; a padded message is a multiple of
// Block long and, when the input unpacked, unpacks with the Padding
// option and the same records.
func FuzzPad(f *testing.F) {
	m := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
	m.SetEdns0(1232, false)
	b, _ := m.Pack()
	f.Add(b)
	m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "site.p2p.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(10, 77, 0, 5)})
	b, _ = m.Pack()
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		out := padding.Pad(b)
		if len(out) == len(b) {
			return
		}
		if len(out)%padding.Block != 0 || !bytes.Equal(out[:12], b[:12]) {
			t.Fatalf("padded %d bytes to %d", len(b), len(out))
		}
		in := new(dns.Msg)
		if in.Unpack(b) != nil {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatalf("padded message does not unpack: %v", err)
		}
		if len(m.Answer) != len(in.Answer) || len(m.Ns) != len(in.Ns) || len(m.Extra) != len(in.Extra) || m.IsEdns0() == nil {
			t.Fatalf("records changed: %v\nwas %v", m, in)
		}
		opts := m.IsEdns0().Option
		if _, ok := opts[len(opts)-1].(*dns.EDNS0_PADDING); !ok {
			t.Fatalf("no padding option last: %v", opts)
		}
	})
}
