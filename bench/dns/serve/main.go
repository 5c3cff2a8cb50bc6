// Command serve is the benchmark's peerdns DNS server: the node's real
// dns.Server answering n local A records (host<i>.bench.test →
// 10.<i>>16>.<i>>8>.<i>), published the same way the localdns actor
// publishes them, without the rest of the node; or, with -n 0 -upstream,
// forwarding everything through its cache. compare.sh uses it so the
// comparison measures the DNS answer path, not node start-up.
//
//	go run ./bench/dns/serve -addr 127.0.0.1:15305 -n 1000 [-cpuprofile f]
//	go run ./bench/dns/serve -addr 127.0.0.1:15306 -n 0 -upstream 127.0.0.1:15301
package main

import (
	"peerdns/internal/view"
	"peerdns/messages"

	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/miekg/dns"

	nodedns "peerdns/dns"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:15305", "UDP and TCP address")
	n := flag.Int("n", 1000, "number of host<i>.bench.test A records")
	sockets := flag.Int("sockets", 0, "UDP sockets (0: one per CPU)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here until stopped")
	probe := flag.String("probe", "", "only ask this DNS server for host0.bench.test A and exit 0 if it answers")
	upstream := flag.String("upstream", "", "forward to this ip:port (with -n 0: a caching forwarder)")
	flag.Parse()
	if *probe != "" {
		os.Exit(probeServer(*probe))
	}

	recs := make([]messages.LocalRecord, 0, *n)
	for i := 0; i < *n; i++ {
		r, err := messages.ParseLocalRecord(fmt.Appendf(nil, `{"name":"host%d.bench.test","type":"A","ttl":3600,"data":"10.%d.%d.%d"}`, i, i>>16&255, i>>8&255, i&255))
		if err != nil {
			log.Fatal(err)
		}
		recs = append(recs, r)
	}
	local := &view.LocalPublished{}
	local.Store(&messages.LocalSnapshot{Version: 1, Records: recs})
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := nodedns.Config{Addr: *addr, UDPSockets: *sockets, ResolvConf: "/nonexistent"}
	if *upstream != "" {
		cfg.Upstreams = []string{*upstream}
	}
	srv, err := nodedns.New(cfg, nil, local, lg)
	if err != nil {
		log.Fatal(err)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving", *n, "names on", srv.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	st := srv.Stats()
	fmt.Printf("queries %d fast %d slow %d dropped %d batches %d per socket %v\n", st.Queries, st.FastAnswers, st.SlowPath, st.Dropped, st.Batches, st.PerSocket)
}

func probeServer(addr string) int {
	m, _, err := (&dns.Client{Timeout: 500 * time.Millisecond}).Exchange(new(dns.Msg).SetQuestion("host0.bench.test.", dns.TypeA), addr)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	case m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0:
		fmt.Fprintf(os.Stderr, "probe: %s, %d answers\n", dns.RcodeToString[m.Rcode], len(m.Answer))
		return 1
	}
	return 0
}
