//go:build linux

package natlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// AdminAddr is where every lab node's admin API listens, on its own
// namespace's loopback.
const AdminAddr = "127.0.0.1:7710"

// Node is one `peerdns node` process in a lab place.
type Node struct {
	Name    string
	Place   *Place
	ID      string
	Started time.Time // when the process was started
	dir     string
	cmd     *exec.Cmd
	log     *os.File
	http    *http.Client
}

// Build compiles the peerdns binary into dir and returns its path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "peerdns")
	out, err := exec.Command("go", "build", "-o", bin, "peerdns/cmd/peerdns").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
}

// Start runs `peerdns node` in place p with its data under dir, joining
// with invite when it is not "". It returns once the admin API is ready.
func Start(bin, name string, p *Place, dir, invite string) (*Node, error) {
	return StartEnv(bin, name, p, dir, invite, nil)
}

// StartEnv is Start with extra environment variables ("NAME=value").
func StartEnv(bin, name string, p *Place, dir, invite string, env []string) (*Node, error) {
	n := &Node{Name: name, Place: p, dir: dir}
	n.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) { return n.Dial(ctx, addr) },
	}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		return nil, err
	}
	n.log = lf
	args := []string{"netns", "exec", p.NS, bin, "node", "--data", filepath.Join(dir, "data"),
		"--admin-addr", AdminAddr, "--p2p-addr", "0.0.0.0:7740",
		"--dns-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0",
		// Names outside the node's data go nowhere: not to the host's
		// resolv.conf, whose address is no lab's.
		"--upstream", "127.0.0.1:1"}
	if invite != "" {
		args = append(args, "--join", invite)
	}
	n.cmd = exec.Command("ip", args...)
	n.cmd.Stdout, n.cmd.Stderr = lf, lf
	n.cmd.Env = append(append(os.Environ(), "LOG_LEVEL=debug"), env...)
	n.Started = time.Now()
	if err := n.cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	err = Poll(30*time.Second, 50*time.Millisecond, func() error {
		var s struct {
			Summary struct {
				PeerID string `json:"peerId"`
			} `json:"summary"`
		}
		if err := n.GetJSON("/api/diagnostics/invites", &s); err != nil {
			return err
		}
		n.ID = s.Summary.PeerID
		return nil
	})
	if err != nil {
		n.Stop()
		return nil, fmt.Errorf("%s did not come up: %w\n%s", name, err, n.LogTail(40))
	}
	return n, nil
}

// Dial opens a TCP connection from inside the node's namespace.
func (n *Node) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := InNS(n.Place.NS, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// Listen opens a TCP listener inside the node's namespace.
func (n *Node) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	err := InNS(n.Place.NS, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// Call sends one admin API request and returns the status and body.
func (n *Node) Call(method, path, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+AdminAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// GetJSON decodes a 200 answer of GET path into v.
func (n *Node) GetJSON(path string, v any) error {
	code, b, err := n.Call("GET", path, "")
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s: %d %s", path, code, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, v)
}

// PostJSON posts body and decodes a 200 answer into v (nil: ignored).
func (n *Node) PostJSON(path, body string, v any) error {
	code, b, err := n.Call("POST", path, body)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("POST %s: %d %s", path, code, bytes.TrimSpace(b))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

// Invite makes a one-time invite.
func (n *Node) Invite() (string, error) {
	var r struct {
		Invite string `json:"invite"`
	}
	err := n.PostJSON("/api/invites", "", &r)
	return r.Invite, err
}

// PeerView is one peer in the node's diagnostics.
type PeerView struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	Path       string  `json:"path"`
	Via        string  `json:"via"`
	RemoteAddr string  `json:"remoteAddr"`
	RTTMillis  float64 `json:"rttMs"`
	// ConnectedAt: when the session came up (unix ms, the node's clock).
	ConnectedAt int64 `json:"connectedAt"`
}

// Diagnostics is the part of /api/diagnostics/invites the lab reads.
type Diagnostics struct {
	Summary struct {
		PeerID string         `json:"peerId"`
		Reach  map[string]any `json:"reach"`
	} `json:"summary"`
	Peers []PeerView `json:"peers"`
}

// Diag reads the node's invite diagnostics.
func (n *Node) Diag() (*Diagnostics, error) {
	var d Diagnostics
	return &d, n.GetJSON("/api/diagnostics/invites", &d)
}

// PeerTo returns the node's view of peer id when connected to it.
func (n *Node) PeerTo(id string) (*PeerView, error) {
	d, err := n.Diag()
	if err != nil {
		return nil, err
	}
	for i := range d.Peers {
		if d.Peers[i].ID == id && d.Peers[i].State == "connected" {
			return &d.Peers[i], nil
		}
	}
	return nil, fmt.Errorf("%s not connected to %.12s", n.Name, id)
}

// Stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (n *Node) Stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
	n.cmd = nil
	if n.log != nil {
		n.log.Close()
	}
	n.http.CloseIdleConnections()
}

// LogTail is the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "node.log"))
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// Poll calls f every interval until it returns nil or within passes.
func Poll(within, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}
