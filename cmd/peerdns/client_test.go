package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// testClient is the test binary as a small HTTP client, run where the
// test itself cannot reach (inside a node's network namespace, through
// `ip netns exec`). Modes (os.Args[1:]):
//
//	call METHOD URL [BODY]          prints the status line, then the body
//	claims BASE PREFIX N WORKERS HASH
//	                                add-domain PREFIX<i>.p2p for i < N with
//	                                WORKERS at once; prints each acknowledged
//	                                domain on its own line as it is acked
func testClient(args []string) int {
	hc := &http.Client{Timeout: 30 * time.Second}
	if len(args) >= 3 && args[0] == "call" {
		body := ""
		if len(args) > 3 {
			body = args[3]
		}
		req, err := http.NewRequest(args[1], args[2], strings.NewReader(body))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d\n%s", resp.StatusCode, b)
		return 0
	}
	if (len(args) == 6 || len(args) == 7 && args[6] == "gated") && args[0] == "claims" {
		n, _ := strconv.Atoi(args[3])
		workers, _ := strconv.Atoi(args[4])
		// One kept-alive connection per worker (the default keeps two).
		hc.Transport = &http.Transport{MaxIdleConnsPerHost: workers}
		if len(args) == 7 {
			// Gated: started ahead, the burst begins at a line on stdin.
			if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
				return 2
			}
		}
		jobs := make(chan int)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					d := fmt.Sprintf("%s%04d.p2p", args[2], i)
					body := `{"domain":"` + d + `","hash":"` + args[5] + `"}`
					resp, err := hc.Post(args[1]+"/api/add-domain", "application/json", strings.NewReader(body))
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						mu.Lock()
						fmt.Println(d)
						mu.Unlock()
					}
				}
			}()
		}
		for i := 0; i < n; i++ {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		return 0
	}
	if len(args) == 4 && args[0] == "watch" {
		return watchResolved(hc, args[1], args[2], args[3])
	}
	fmt.Fprintln(os.Stderr, "usage: call METHOD URL [BODY] | claims BASE PREFIX N WORKERS HASH [gated] | watch BASE PREFIX N")
	return 2
}

// watchResolved waits for a line on stdin, then polls BASE's resolved
// domains every 10 ms until PREFIX0000.p2p … PREFIX<N-1>.p2p all resolve,
// and prints that moment (Unix nanoseconds). Started before a burst, it
// times the resolution on its node without a process start in the way.
func watchResolved(hc *http.Client, base, prefix, count string) int {
	n, _ := strconv.Atoi(count)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); <-tick.C {
		resp, err := hc.Get(base + "/api/resolved-domains")
		if err != nil {
			continue
		}
		var list []struct {
			Domain          string `json:"domain"`
			ConsensusStatus string `json:"consensusStatus"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			continue
		}
		resolved := 0
		for _, d := range list {
			if d.ConsensusStatus == "resolved" && strings.HasPrefix(d.Domain, prefix) {
				resolved++
			}
		}
		if resolved >= n {
			fmt.Println(time.Now().UnixNano())
			return 0
		}
	}
	return 1
}
