//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lab is the network: one namespace per node on a bridge in a hub
// namespace, 192.0.2.0/24 (documentation range), no route out.
type lab struct {
	prefix string // namespace names: <prefix>h (hub), <prefix>0..N-1
	n      int
}

func (l *lab) ns(i int) string { return fmt.Sprintf("%s%d", l.prefix, i) }
func (l *lab) hub() string     { return l.prefix + "h" }
func (l *lab) ip(i int) string { return fmt.Sprintf("192.0.2.%d", 10+i) }

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nsRun runs a command in node i's namespace.
func (l *lab) nsRun(i int, args ...string) error {
	return run(append([]string{"ip", "netns", "exec", l.ns(i)}, args...)...)
}

func newLab(prefix string, n int) (*lab, error) {
	l := &lab{prefix: prefix, n: n}
	steps := [][]string{
		{"ip", "netns", "add", l.hub()},
		{"ip", "-n", l.hub(), "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", l.hub(), "link", "set", "br0", "up"},
	}
	for i := 0; i < n; i++ {
		steps = append(steps,
			[]string{"ip", "netns", "add", l.ns(i)},
			[]string{"ip", "-n", l.ns(i), "link", "add", "v0", "type", "veth", "peer", "name", fmt.Sprintf("h%d", i), "netns", l.hub()},
			[]string{"ip", "-n", l.hub(), "link", "set", fmt.Sprintf("h%d", i), "master", "br0"},
			[]string{"ip", "-n", l.hub(), "link", "set", fmt.Sprintf("h%d", i), "up"},
			[]string{"ip", "-n", l.ns(i), "addr", "add", l.ip(i) + "/24", "dev", "v0"},
			[]string{"ip", "-n", l.ns(i), "link", "set", "v0", "up"},
			[]string{"ip", "-n", l.ns(i), "link", "set", "lo", "up"},
			// The nemesis's own table: partitions (a set of peers to
			// drop) and drops at the node's output hook.
			[]string{"ip", "netns", "exec", l.ns(i), "nft", "add table inet chaos; " +
				"add set inet chaos cut { type ipv4_addr; }; " +
				"add chain inet chaos in { type filter hook input priority 0; }; " +
				"add chain inet chaos out { type filter hook output priority 0; }; " +
				"add rule inet chaos in ip saddr @cut drop; " +
				"add rule inet chaos out ip daddr @cut drop; " +
				"add chain inet chaos drops; add rule inet chaos out jump drops"},
		)
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// close deletes every namespace of the lab (their interfaces go with
// them).
func (l *lab) close() {
	for i := 0; i < l.n; i++ {
		_ = run("ip", "netns", "del", l.ns(i))
	}
	_ = run("ip", "netns", "del", l.hub())
}

// client is an HTTP client whose connections are made inside node i's
// namespace, so it reaches the node's loopback admin API from here.
func (l *lab) client(i int) *http.Client {
	path := "/var/run/netns/" + l.ns(i)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, path, network, addr)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// inNS runs f on a thread of its own that entered the namespace at path:
// sockets f makes stay in that namespace, and the thread ends with the
// goroutine, still locked, so no other goroutine ever runs there.
func inNS(path string, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := os.Open(path)
		if err != nil {
			ch <- err
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		ch <- f()
	}()
	return <-ch
}

// dialIn dials from inside the namespace at path.
func dialIn(ctx context.Context, path, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNS(path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listenIn makes a TCP listener inside the namespace at path.
func listenIn(path, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNS(path, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// nsPath is the namespace file of node i.
func (l *lab) nsPath(i int) string { return "/var/run/netns/" + l.ns(i) }

// diagnose says whether node i's namespace still reaches the others
// (one ping each) and whether the lab's namespaces all still exist: a
// node that cannot join says whether its network or the node is at fault.
func (l *lab) diagnose(i int) string {
	var out []string
	for j := 0; j < l.n; j++ {
		if j == i {
			continue
		}
		if err := l.nsRun(i, "ping", "-c1", "-W1", l.ip(j)); err != nil {
			out = append(out, fmt.Sprintf("%s does not answer ping", l.ip(j)))
		}
	}
	names, _ := exec.Command("ip", "netns", "list").Output()
	for j := -1; j < l.n; j++ {
		name := l.hub()
		if j >= 0 {
			name = l.ns(j)
		}
		if !strings.Contains(string(names), name+" ") && !strings.Contains(string(names), name+"\n") {
			out = append(out, "namespace "+name+" is gone")
		}
	}
	if len(out) == 0 {
		return "every other node answers ping"
	}
	return strings.Join(out, ", ")
}
