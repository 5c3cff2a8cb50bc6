// Package dnsbench holds the DNS benchmarks: the answer path alone and a
// full UDP round trip through a running server (go test -bench . here),
// plus compare.sh for the side-by-side run with other DNS servers.
package dnsbench

import (
	"peerdns/internal/view"
	"peerdns/messages"

	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	nodedns "peerdns/dns"
	"peerdns/dns/dnstest"
	"peerdns/dns/zone"
)

const names = 1000

func snapshot(b *testing.B) *messages.LocalSnapshot {
	b.Helper()
	recs := make([]messages.LocalRecord, 0, names)
	for i := 0; i < names; i++ {
		r, err := messages.ParseLocalRecord(fmt.Appendf(nil, `{"name":"host%d.bench.test","type":"A","ttl":3600,"data":"10.0.%d.%d"}`, i, i>>8&255, i&255))
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, r)
	}
	return &messages.LocalSnapshot{Version: 1, Records: recs}
}

func queries(b *testing.B, edns bool) [][]byte {
	b.Helper()
	out := make([][]byte, names)
	for i := range out {
		m := new(dns.Msg).SetQuestion(fmt.Sprintf("host%d.bench.test.", i), dns.TypeA)
		if edns {
			m.SetEdns0(1232, false)
		}
		p, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// BenchmarkAnswerPath is the fast path alone: question read from the
// packet, pre-packed answer copied out.
func BenchmarkAnswerPath(b *testing.B) {
	for _, edns := range []bool{false, true} {
		b.Run(fmt.Sprintf("edns=%v", edns), func(b *testing.B) {
			t := zone.Build(nil, snapshot(b), zone.Options{})
			qs := queries(b, edns)
			out := make([]byte, 1232)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if t.Fast(qs[i%names], out, 1232, 1232) == 0 {
					b.Fatal("not answered")
				}
			}
		})
	}
}

// BenchmarkSlowPath is the same question through miekg/dns (what every
// query would cost without the fast path).
func BenchmarkSlowPath(b *testing.B) {
	t := zone.Build(nil, snapshot(b), zone.Options{})
	qs := queries(b, false)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := new(dns.Msg)
		if err := req.Unpack(qs[i%names]); err != nil {
			b.Fatal(err)
		}
		res := t.Resolve(req.Question[0].Name, req.Question[0].Qtype, req.Question[0].Qclass)
		resp := new(dns.Msg).SetReply(req)
		resp.Answer = res.Answer
		if _, err := resp.Pack(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUDPRoundTrip is one query and its answer over loopback UDP
// through a running server, per client goroutine: names from local
// records, or (cached) the same names forwarded to an upstream once and
// then answered from the cache.
func BenchmarkUDPRoundTrip(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		local := &view.LocalPublished{}
		local.Store(snapshot(b))
		roundTrip(b, nodedns.Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent"}, local)
	})
	b.Run("cached", func(b *testing.B) {
		names := map[string]string{}
		for i := 0; i < 1000; i++ {
			names[fmt.Sprintf("host%d.bench.test", i)] = fmt.Sprintf("10.0.%d.%d", i>>8&255, i&255)
		}
		up := dnstest.Start(b, names)
		roundTrip(b, nodedns.Config{Addr: "127.0.0.1:0", Upstreams: []string{up.Addr}}, nil)
	})
}

func roundTrip(b *testing.B, cfg nodedns.Config, local *view.LocalPublished) {
	srv, err := nodedns.New(cfg, nil, local, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	qs := queries(b, false)
	if cfg.Upstreams != nil {
		// Warm the cache.
		for _, q := range qs {
			m := new(dns.Msg)
			if err := m.Unpack(q); err != nil {
				b.Fatal(err)
			}
			if _, _, err := (&dns.Client{}).Exchange(m, srv.Addr()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", srv.Addr())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1232)
		i := 0
		for pb.Next() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write(qs[i%names]); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
