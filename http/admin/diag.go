package admin

// Diagnostics: ping, traceroute, connection-test and the interface
// layout (bandwidth), and GET /api/network-interfaces.
//
// ping and traceroute run the system tools (iputils ping, traceroute)
// with an argument list, never a shell, after checking the target is an
// IP address or a host name (letters, digits, '-', '.', at most 253
// bytes, not starting with '-'); anything else is 400. count is 1..20
// (default 4; out of range is 400). Without stream the answer comes when
// the tool ends (at most count*2+10 s for ping, 60 s for traceroute);
// with stream: true the answer is NDJSON, one {type: "output", data,
// timestamp, success, exitCode} line per line the tool prints and a last
// {type: "complete", ...} line; each line has the server's write timeout
// (15 s) to go out, so a stream lasts as long as its tool, and the tool
// is killed as soon as the client goes away or stops reading (the next
// write fails). connection-test resolves the
// domain through this node's own DNS server (local records, p2p domains,
// upstream) and times a TCP connect (5 s at most). At most
// maxDiagnostics (8) ping and traceroute runs go at once, streamed or
// not; one more is a 503 that starts no process.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	nodedns "peerdns/dns"
	"peerdns/http/httpx"
	"peerdns/internal/vif"
)

// RegisterDiagnostics adds ping, traceroute, connection-test, bandwidth
// and network-interfaces.
func RegisterDiagnostics(r *router.Router, log *slog.Logger, dns *nodedns.Server) {
	slots := make(chan struct{}, maxDiagnostics)
	r.POST("/api/diagnostics/ping", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error { return runTool(ctx, log, slots, "ping") }))
	r.POST("/api/diagnostics/traceroute", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error { return runTool(ctx, log, slots, "traceroute") }))
	r.POST("/api/diagnostics/connection-test", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error { return connectionTest(ctx, dns) }))
	r.GET("/api/diagnostics/bandwidth", httpx.Wrap(log, bandwidth))
	r.GET("/api/network-interfaces", httpx.Wrap(log, networkInterfaces))
}

// validTarget: an IP address, or a host name a resolver would take.
func validTarget(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	if s == "" || len(s) > 253 || s[0] == '-' || s[0] == '.' {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if l == "" || len(l) > 63 || l[0] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// maxDiagnostics is how many ping and traceroute runs go at once: each
// is a process for up to a minute, whose client may already have left.
const maxDiagnostics = 8

type toolRequest struct {
	Target string `json:"target"`
	Count  *int   `json:"count"`
	Stream bool   `json:"stream"`
}

func runTool(ctx *fasthttp.RequestCtx, log *slog.Logger, slots chan struct{}, tool string) error {
	var req toolRequest
	if err := httpx.DecodeJSON(ctx, &req, 400); err != nil {
		return err
	}
	req.Target = strings.TrimSpace(req.Target)
	if req.Target == "" {
		return httpx.BadRequest("target is required")
	}
	if !validTarget(req.Target) {
		return httpx.BadRequest("target must be an IP address or a host name")
	}
	count := 4
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > 20 {
		return httpx.BadRequest("count must be 1..20")
	}
	path, err := exec.LookPath(tool)
	if err != nil {
		return httpx.Internal("%s is not installed on this machine (Debian: apt-get install %s)", tool, map[string]string{"ping": "iputils-ping", "traceroute": "traceroute"}[tool])
	}
	select {
	case slots <- struct{}{}:
	default:
		return httpx.Errorf(fasthttp.StatusServiceUnavailable, "%d diagnostics (ping, traceroute) are running, the most at once; retry when one ends", maxDiagnostics)
	}
	release := func() { <-slots }
	var args []string
	timeout := 60 * time.Second
	if tool == "ping" {
		args = []string{"-c", fmt.Sprint(count), "-W", "2", req.Target}
		timeout = time.Duration(count*2+10) * time.Second
	} else {
		args = []string{"-w", "2", "-q", "1", "-m", "20", req.Target}
	}
	if req.Stream {
		ctx.SetContentType("application/x-ndjson")
		conn := ctx.Conn()
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			defer release()
			streamTool(w, conn, log, path, args, timeout)
		})
		return nil
	}
	defer release()
	start := time.Now()
	cctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, path, args...).CombinedOutput()
	res := map[string]any{"success": err == nil, "target": req.Target, "output": string(out), "error": "",
		"responseTime": time.Since(start).Milliseconds()}
	if tool == "ping" {
		res["count"] = count
	}
	if err != nil {
		res["error"] = err.Error()
	}
	return httpx.JSON(ctx, 200, res)
}

type streamLine struct {
	Type      string `json:"type"`
	Data      string `json:"data"`
	Timestamp int64  `json:"timestamp"`
	Success   bool   `json:"success"`
	ExitCode  int    `json:"exitCode"`
}

// streamTool runs the tool and writes its lines as NDJSON to conn through
// w; a failed write (the client left, or read nothing for writeTimeout)
// kills it. The server's write deadline is set once for the whole
// answer, shorter than a tool may run, so each line moves it on.
func streamTool(w *bufio.Writer, conn net.Conn, log *slog.Logger, path string, args []string, timeout time.Duration) {
	cctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, path, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	send := func(l streamLine) bool {
		l.Timestamp = time.Now().UnixMilli()
		_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		b, _ := json.Marshal(l)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return false
		}
		return w.Flush() == nil
	}
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		send(streamLine{Type: "error", Data: err.Error(), ExitCode: -1})
		return
	}
	pw.Close()
	sc := bufio.NewScanner(pr)
	gone := false
	for sc.Scan() {
		if !send(streamLine{Type: "output", Data: sc.Text(), Success: true}) {
			gone = true
			cancel() // the client went away: stop the tool
			break
		}
	}
	pr.Close()
	err = cmd.Wait()
	if gone {
		log.Info("diagnostic stopped: the client went away", "tool", path)
		return
	}
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	data := ""
	if err != nil {
		data = err.Error()
	}
	send(streamLine{Type: "complete", Data: data, Success: err == nil, ExitCode: code})
}

func connectionTest(ctx *fasthttp.RequestCtx, dns *nodedns.Server) error {
	var req struct {
		Domain string `json:"domain"`
		Port   *int   `json:"port"`
	}
	if err := httpx.DecodeJSON(ctx, &req, 400); err != nil {
		return err
	}
	req.Domain = strings.TrimSpace(req.Domain)
	switch {
	case req.Domain == "":
		return httpx.BadRequest("domain is required")
	case req.Port == nil:
		return httpx.BadRequest("port is required")
	case *req.Port < 1 || *req.Port > 65535:
		return httpx.BadRequest("port must be 1..65535")
	case !validTarget(req.Domain):
		return httpx.BadRequest("domain must be a host name or an IP address")
	}
	start := time.Now()
	res := map[string]any{"success": false, "domain": req.Domain, "port": *req.Port, "ip": ""}
	finish := func() error {
		res["responseTime"] = time.Since(start).Milliseconds()
		return httpx.JSON(ctx, 200, res)
	}
	ip := req.Domain
	if _, err := netip.ParseAddr(ip); err != nil {
		if dns == nil {
			return httpx.Internal("dns server is not running")
		}
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lr, err := dns.Lookup(lctx, req.Domain, "A")
		cancel()
		if err != nil {
			return httpx.Internal("%v", err)
		}
		if !lr.Success || len(lr.Results) == 0 {
			res["error"] = "no address for " + req.Domain
			if lr.Error != "" {
				res["error"] = lr.Error
			}
			return finish()
		}
		ip = lr.Results[0]
	}
	res["ip"] = ip
	t0 := time.Now()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(*req.Port)), 5*time.Second)
	if err != nil {
		res["error"] = err.Error()
		return finish()
	}
	c.Close()
	res["success"] = true
	res["latency"] = time.Since(t0).Milliseconds()
	return finish()
}

type ifaceInfo struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
}

func listInterfaces() ([]ifaceInfo, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]ifaceInfo, 0, len(ifs))
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		info := ifaceInfo{Name: i.Name, Addresses: []string{}}
		for _, a := range addrs {
			info.Addresses = append(info.Addresses, a.String())
		}
		out = append(out, info)
	}
	return out, nil
}

func bandwidth(ctx *fasthttp.RequestCtx) error {
	start := time.Now()
	ifs, err := listInterfaces()
	if err != nil {
		return &httpx.Error{Status: 500, Msg: err.Error(), JSON: map[string]any{"error": err.Error()}}
	}
	m := map[string]ifaceInfo{}
	for _, i := range ifs {
		m[i.Name] = i
	}
	return httpx.JSON(ctx, 200, map[string]any{"interfaces": m, "note": "layout only: addresses per interface, no live throughput",
		"responseTime": time.Since(start).Milliseconds()})
}

// defaultRouteInterface reads the interface of the IPv4 default route
// (Linux /proc/net/route); "" elsewhere or when there is none.
func defaultRouteInterface() string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		f := strings.Fields(string(line))
		if len(f) > 2 && f[1] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// networkInterfaces answers {interfaces: [{value, label}]}: loopback
// first, then by name; the default-route interface's label says so.
func networkInterfaces(ctx *fasthttp.RequestCtx) error {
	ifs, err := listInterfaces()
	if err != nil {
		return &httpx.Error{Status: 500, Msg: err.Error(), JSON: map[string]any{"error": err.Error()}}
	}
	loop := map[string]bool{"lo": true, "lo0": true, "Loopback Pseudo-Interface 1": true}
	sort.SliceStable(ifs, func(i, j int) bool {
		if loop[ifs[i].Name] != loop[ifs[j].Name] {
			return loop[ifs[i].Name]
		}
		return ifs[i].Name < ifs[j].Name
	})
	def := defaultRouteInterface()
	out := make([]map[string]string, 0, len(ifs))
	for _, i := range ifs {
		label := i.Name
		if len(i.Addresses) > 0 {
			label += " (" + strings.Join(i.Addresses, ", ") + ")"
		}
		switch {
		case loop[i.Name]:
			label += " - loopback"
		case i.Name == def:
			label += " - default route"
		case i.Name == vif.DefaultName:
			label += " - peerdns virtual interface (domain addresses)"
		}
		out = append(out, map[string]string{"value": i.Name, "label": label})
	}
	return httpx.JSON(ctx, 200, map[string]any{"interfaces": out})
}
