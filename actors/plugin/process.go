package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"peerdns/transport"
)

// runner keeps one plugin's handler process running: start it in the
// plugin's folder with a minimal environment, open the session, send
// init, publish the session to the Runtime, wait for the exit, and start
// again with backoff. CrashLoop exits within CrashWindow stop it for
// good (reported through onGiveUp). stop kills the process (SIGTERM,
// then SIGKILL after a grace period) and waits for the process and its
// readers. The handler's children end with it: where the host allows,
// it runs in a PID namespace of its own (contain_linux.go); elsewhere a
// child that left the process group is neither killed nor waited for.
type runner struct {
	p        *Plugin
	rt       *Runtime
	log      *slog.Logger
	wsLog    func(level, component, message string) // plugin-log hints
	lines    lineLog                                // the plugins channel; nil: log directly
	serve    serveFunc
	init     func() any // the init params (settings read at each start)
	backoff  transport.Backoff
	loop     int
	window   time.Duration
	timeout  time.Duration
	onGiveUp func(reason string)

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *runner) start() {
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.done = make(chan struct{})
	go r.run()
}

func (r *runner) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

func (r *runner) run() {
	defer close(r.done)
	var crashes []time.Time
	b := r.backoff
	for r.ctx.Err() == nil {
		began := time.Now()
		err := r.once()
		if r.ctx.Err() != nil {
			return
		}
		now := time.Now()
		if now.Sub(began) > r.window {
			b.Reset()
		}
		crashes = append(crashes, now)
		for len(crashes) > 0 && now.Sub(crashes[0]) > r.window {
			crashes = crashes[1:]
		}
		if len(crashes) >= r.loop {
			reason := fmt.Sprintf("handler exited %d times within %s (last: %v); stopped", len(crashes), r.window, err)
			r.log.Error("plugin handler crash loop", "domain", r.rt.Domain, "err", err, "component", "handler")
			r.onGiveUp(reason)
			return
		}
		wait := b.Next()
		r.log.Warn("plugin handler exited; restarting", "domain", r.rt.Domain, "err", err, "in", wait.String(), "component", "handler")
		if !transport.Wait(r.ctx, wait) {
			return
		}
	}
}

// once runs the process until it exits or the runner stops.
func (r *runner) once() error {
	cmd, stdin, stdout, stderr, err := r.startHandler()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.stderrLines(stderr)
	}()
	pipes := []io.Closer{stdout, stderr}
	sess := newSession(stdout, stdin, r.serve, sessionHooks{garbage: r.garbage(), offLoop: waitsOnPeer, dropped: r.droppedNotes()})
	exited := make(chan error, 1)
	gone := processGone(cmd.Process.Pid)
	go func() {
		select {
		case <-sess.Done(): // stdout closed (or the session failed): the pipes are drained
		case <-gone:
			// The handler exited. What it wrote is read within a moment,
			// unless a child that left its process group (setsid) holds
			// the pipes open, where handlers are not contained: then our
			// ends are closed, so the exit is seen and the handler reaped.
			t := time.NewTimer(time.Second)
			select {
			case <-sess.Done():
			case <-t.C:
				for _, p := range pipes {
					_ = p.Close()
				}
				<-sess.Done()
			}
			t.Stop()
		}
		r.rt.sess.CompareAndSwap(sess, nil)
		wg.Wait()
		exited <- cmd.Wait()
	}()
	ictx, cancel := context.WithTimeout(r.ctx, r.timeout)
	_, ierr := sess.Call(ictx, "init", r.init())
	cancel()
	if ierr == nil {
		r.rt.sess.Store(sess)
		go r.settingsSender(sess)
		r.log.Info("plugin handler started", "domain", r.rt.Domain, "pid", cmd.Process.Pid, "component", "handler")
	} else {
		r.log.Error("plugin handler did not answer init", "domain", r.rt.Domain, "err", ierr, "component", "handler")
	}
	defer r.rt.sess.CompareAndSwap(sess, nil)
	if ierr != nil {
		r.kill(cmd, exited, sess, pipes)
		return fmt.Errorf("init: %w", ierr)
	}
	select {
	case err := <-exited:
		sess.fail(fmt.Errorf("%w: handler exited", ErrSessionClosed))
		if err == nil {
			err = fmt.Errorf("exited")
		}
		return err
	case <-sess.ctx.Done():
		// The session failed (a line too long, a write error): stop the
		// process.
		r.kill(cmd, exited, sess, pipes)
		return sess.Err()
	case <-r.ctx.Done():
		r.kill(cmd, exited, sess, pipes)
		return nil
	}
}

// startHandler starts the handler process with its three pipes: in a
// PID namespace of its own where the host allows it (contain_linux.go),
// else as a process group of its own. A contained start that fails for
// want of the namespaces is tried once more without them; if that one
// starts, the host refused them, and later handlers start without.
func (r *runner) startHandler() (cmd *exec.Cmd, stdin io.WriteCloser, stdout, stderr io.ReadCloser, err error) {
	attr, contained := handlerAttr()
	cmd, stdin, stdout, stderr, err = r.startWith(attr)
	if err != nil && contained && mayBeRefusedNamespaces(err) {
		if cmd, stdin, stdout, stderr, err = r.startWith(groupAttr()); err == nil {
			noteUncontained()
			r.log.Warn("plugin handlers start without a PID namespace of their own: the host refused it; a child that leaves a handler's process group will outlive its plugin",
				"domain", r.rt.Domain, "component", "handler")
		}
	}
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("start %s: %w", r.p.Manifest.Handler, err)
	}
	return cmd, stdin, stdout, stderr, nil
}

func (r *runner) startWith(attr *syscall.SysProcAttr) (cmd *exec.Cmd, stdin io.WriteCloser, stdout, stderr io.ReadCloser, err error) {
	cmd = exec.Command(r.p.Handler)
	cmd.Dir = r.p.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.p.Dir, "PEERDNS_PLUGIN_DOMAIN=" + r.rt.Domain}
	cmd.SysProcAttr = attr
	if stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, nil, nil, err
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, nil, nil, nil, err
	}
	if stderr, err = cmd.StderrPipe(); err != nil {
		return nil, nil, nil, nil, err
	}
	if err = cmd.Start(); err != nil {
		return nil, nil, nil, nil, err
	}
	return cmd, stdin, stdout, stderr, nil
}

// kill ends the process group: SIGTERM, SIGKILL after 2 s (a
// contained handler is its namespace's pid 1, which gets SIGTERM only if
// it catches it: one that neither catches nor ignores it, and has no
// children, is killed at once, as SIGTERM would have (termDropped); its
// namespace ends with it). Where handlers are not contained, a child
// that left the group (setsid) outlives both and keeps the handler's
// stdout and stderr open, so their reads never end and the handler is
// never reaped: 1 s after the SIGKILL our ends of the pipes are closed,
// which ends the reads, and the handler is waited for.
func (r *runner) kill(cmd *exec.Cmd, exited chan error, sess *session, pipes []io.Closer) {
	sess.fail(fmt.Errorf("%w: handler stopped", ErrSessionClosed))
	select {
	case <-exited:
		return // reaped already: its pid may name another process by now
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	if termDropped(cmd.Process.Pid) {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	t.Reset(time.Second)
	select {
	case <-exited:
		return
	case <-t.C:
	}
	for _, p := range pipes {
		_ = p.Close()
	}
	<-exited
}

// stderrLines logs the handler's stderr, one line each, on the plugins
// channel: a line over 64 KiB is cut there, the rest of it skipped, and
// the lines after it logged as before it.
func (r *runner) stderrLines(rd io.Reader) {
	br := bufio.NewReaderSize(rd, 64<<10)
	skip := false // the rest of a cut line
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && !skip {
			line := strings.TrimRight(string(chunk), "\r\n")
			if errors.Is(err, bufio.ErrBufferFull) {
				line += "…"
			}
			if r.lines != nil {
				r.lines(slog.LevelInfo, line, "stderr")
			} else {
				r.log.Info(line, "domain", r.rt.Domain, "component", "stderr")
			}
			if r.wsLog != nil {
				r.wsLog("info", "stderr", clip([]byte(line)))
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			skip = true
		case err != nil:
			return
		default:
			skip = false
		}
	}
}

// garbage logs lines that are not JSON-RPC, at most one a second.
func (r *runner) garbage() func([]byte) {
	var last time.Time
	var skipped int
	return func(line []byte) {
		if time.Since(last) < time.Second {
			skipped++
			return
		}
		last = time.Now()
		r.log.Warn("plugin handler wrote a line that is not JSON-RPC", "domain", r.rt.Domain, "line", clip(line), "skipped", skipped, "component", "handler")
		skipped = 0
	}
}

// waitsOnPeer: the handler's calls that wait on another peer (up to the
// peer timeout), whose notifications are served off the session's read
// loop.
func waitsOnPeer(method string) bool { return method == "peer.call" || method == "peer.send" }

// droppedNotes logs the notifications a session dropped because
// maxNotifyInflight were waiting: at most a line a second, each with the
// count since the one before (the first drop is logged at once).
func (r *runner) droppedNotes() func(method string) {
	var last time.Time
	var n int
	return func(method string) {
		n++
		if time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		r.log.Warn("plugin handler sent more peer notifications than wait at once; peer notifications dropped", "domain", r.rt.Domain,
			"method", method, "dropped", n, "at_once", maxNotifyInflight, "component", "handler")
		n = 0
	}
}

// settingsSender sends settings.changed with the settings in force each
// time they change, until the session ends. It waits for the handler to
// take its input on its own goroutine, so the supervisor that saved the
// settings does not, and changes made meanwhile are sent once, the
// newest.
func (r *runner) settingsSender(sess *session) {
	for {
		select {
		case <-r.rt.newSettings:
			if sess.Notify(sess.ctx, "settings.changed", map[string]any{"settings": *r.rt.settings.Load()}) != nil {
				// The session ended: the change is the next session's
				// (its init may have read the settings before it).
				r.rt.settingsChanged()
				return
			}
		case <-sess.ctx.Done():
			return
		}
	}
}

// initParams is the init call.
func initParams(domain, peerID string, settings map[string]any) any {
	return map[string]any{"domain": domain, "peerId": peerID, "settings": settings}
}
