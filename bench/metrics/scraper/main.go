// Command scraper GETs a node's /metrics at a fixed rate for a bounded
// time, as Prometheus does (keep-alive, gzip accepted), and prints how
// many scrapes answered 200 and 503 and the mean body size, so
// bench/metrics/scrape.sh can load the node's DNS with and without it.
package main

import (
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7710", "admin address of the node")
	rate := flag.Float64("rate", 1, "scrapes per second")
	dur := flag.Duration("duration", 10*time.Second, "how long to scrape (the run stops by itself)")
	gz := flag.Bool("gzip", true, "ask for gzip, as Prometheus does")
	flag.Parse()
	if *rate <= 0 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "scraper: -rate and -duration must be positive")
		os.Exit(2)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	end := time.After(*dur)
	var ok, busy, failed, wire, plain int64
	for {
		select {
		case <-end:
			n := max(ok, 1)
			fmt.Printf("scrapes=%d ok=%d busy=%d failed=%d wire_bytes=%d body_bytes=%d\n", ok+busy+failed, ok, busy, failed, wire/n, plain/n)
			return
		case <-tick.C:
		}
		req, _ := http.NewRequest("GET", "http://"+*addr+"/metrics", nil)
		if *gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := c.Do(req)
		if err != nil {
			failed++
			continue
		}
		cw := &counter{r: resp.Body}
		var body io.Reader = cw
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if zr, err := gzip.NewReader(cw); err == nil {
				body = zr
			}
		}
		n, _ := io.Copy(io.Discard, body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			ok++
			wire += cw.n
			plain += n
		case 503:
			busy++
		default:
			failed++
		}
	}
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
