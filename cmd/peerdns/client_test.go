package main

import (
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
	if len(args) == 6 && args[0] == "claims" {
		n, _ := strconv.Atoi(args[3])
		workers, _ := strconv.Atoi(args[4])
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
	fmt.Fprintln(os.Stderr, "usage: call METHOD URL [BODY] | claims BASE PREFIX N WORKERS HASH")
	return 2
}
