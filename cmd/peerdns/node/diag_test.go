package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// ping and traceroute to 127.0.0.1, plain and streamed; hostile targets
// refused; connection-test through a local DNS record to an open and a
// closed port; the interface listings.
func TestDiagnostics(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, bad := range []string{`{}`, `{"target":"-f"}`, `{"target":";id"}`, `{"target":"$(id)"}`, `{"target":"a b"}`,
		`{"target":"` + strings.Repeat("a", 10<<10) + `"}`, `{"target":"127.0.0.1","count":0}`, `{"target":"127.0.0.1","count":21}`} {
		if code, body := call(t, "POST", base+"/api/diagnostics/ping", bad); code != 400 {
			t.Fatalf("ping %.60s: %d %s", bad, code, body)
		}
	}
	for _, tool := range []string{"ping", "traceroute"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("%s not installed (apt-get install iputils-ping traceroute): its checks are left out", tool)
			continue
		}
		var res struct {
			Success bool
			Output  string
			Target  string
		}
		mustJSON(t, "POST", base+"/api/diagnostics/"+tool, `{"target":"127.0.0.1","count":2}`, 200, &res)
		if res.Target != "127.0.0.1" || !strings.Contains(res.Output, "127.0.0.1") {
			t.Fatalf("%s: %+v", tool, res)
		}
		code, body := call(t, "POST", base+"/api/diagnostics/"+tool, `{"target":"127.0.0.1","count":2,"stream":true}`)
		if code != 200 {
			t.Fatalf("%s stream: %d %s", tool, code, body)
		}
		sc := bufio.NewScanner(strings.NewReader(body))
		var last map[string]any
		lines := 0
		for sc.Scan() {
			if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
				t.Fatalf("%s: not NDJSON: %q", tool, sc.Text())
			}
			lines++
		}
		if lines < 2 || last["type"] != "complete" || last["exitCode"] == nil {
			t.Fatalf("%s stream ended with %v after %d lines", tool, last, lines)
		}
	}

	// connection-test through a local record.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"svc.lan","type":"A","ttl":60,"data":"127.0.0.1"}`, 200, nil)
	var ct struct {
		Success bool
		IP      string
		Latency *int64
		Error   string
	}
	port := ln.Addr().(*net.TCPAddr).Port
	mustJSON(t, "POST", base+"/api/diagnostics/connection-test", fmt.Sprintf(`{"domain":"svc.lan","port":%d}`, port), 200, &ct)
	if !ct.Success || ct.IP != "127.0.0.1" || ct.Latency == nil {
		t.Fatalf("open port: %+v", ct)
	}
	ct = struct {
		Success bool
		IP      string
		Latency *int64
		Error   string
	}{}
	mustJSON(t, "POST", base+"/api/diagnostics/connection-test", fmt.Sprintf(`{"domain":"svc.lan","port":%d}`, freePort(t)), 200, &ct)
	if ct.Success || ct.Error == "" {
		t.Fatalf("closed port: %+v", ct)
	}
	for _, bad := range []string{`{"port":80}`, `{"domain":"svc.lan"}`, `{"domain":"svc.lan","port":0}`, `{"domain":";x","port":80}`} {
		if code, _ := call(t, "POST", base+"/api/diagnostics/connection-test", bad); code != 400 {
			t.Fatalf("connection-test %s: %d", bad, code)
		}
	}

	var ifs struct {
		Interfaces []struct{ Value, Label string }
	}
	mustJSON(t, "GET", base+"/api/network-interfaces", "", 200, &ifs)
	if len(ifs.Interfaces) == 0 || ifs.Interfaces[0].Value != "lo" || !strings.Contains(ifs.Interfaces[0].Label, "loopback") {
		t.Fatalf("network-interfaces: %+v", ifs)
	}
	var bw struct {
		Interfaces map[string]struct {
			Name      string
			Addresses []string
		}
	}
	mustJSON(t, "GET", base+"/api/diagnostics/bandwidth", "", 200, &bw)
	if len(bw.Interfaces["lo"].Addresses) == 0 {
		t.Fatalf("bandwidth: %+v", bw)
	}
}
