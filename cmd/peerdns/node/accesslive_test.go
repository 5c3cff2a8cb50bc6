package node

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The access log's batches go round (the edge formats into one, the
// channel actor writes and publishes it, the WebSocket hub copies lines
// out of it, and it comes back to be filled again): under load, with a
// subscriber tailing the channel, every line reaches the subscriber and
// the file whole, once each, and none shows another's text.
func TestAccessLinesLiveUnderLoad(t *testing.T) {
	dir := t.TempDir()
	n := newTestNode(t, dir)
	c := dialWS(t, n.AdminAddr(), 0)
	if err := c.WriteJSON(map[string]any{"type": "subscribe-log", "channel": "httpProxy", "lines": 1}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, ofType("log-snapshot"))
	edge, _ := n.EdgeAddrs()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()

	// Waves of 100 requests from 8 clients: a WebSocket client more than
	// 256 messages behind is dropped by design, so each wave is read
	// before the next is sent.
	const waves, perWave, clients = 5, 100, 8
	line := func(i int) string {
		return fmt.Sprintf("level=INFO msg=request method=GET host=nobody.p2p path=/load-%04d status=404 ", i)
	}
	seen := map[int]bool{}
	for w := range waves {
		var wg sync.WaitGroup
		errs := make(chan error, perWave)
		for g := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w*perWave + g; i < (w+1)*perWave; i += clients {
					req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/load-%04d", edge, i), nil)
					req.Host = "nobody.p2p"
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for got := 0; got < perWave; {
			m := readUntil(t, c, ofType("file-log"))
			msg := fmt.Sprint(m["message"])
			var i int
			if _, err := fmt.Sscanf(msg[strings.Index(msg, "path=/load-")+len("path=/load-"):], "%04d", &i); err != nil ||
				!strings.Contains(msg, line(i)) || !strings.HasPrefix(msg, "time=") || m["channel"] != "httpProxy" {
				t.Fatalf("live line %q", msg)
			}
			if seen[i] {
				t.Fatalf("line %d came twice", i)
			}
			seen[i] = true
			got++
		}
	}
	// The file has each line once (written before it was published).
	b, err := os.ReadFile(filepath.Join(dir, "logs", "httpProxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := range waves * perWave {
		if k := strings.Count(text, line(i)); k != 1 {
			t.Fatalf("line %d is in the file %d times", i, k)
		}
	}
	if k := strings.Count(text, "\n"); k < waves*perWave {
		t.Fatalf("%d lines in the file for %d requests", k, waves*perWave)
	}
}
