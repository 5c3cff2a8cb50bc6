package plugin

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// A handler starts as the first process of a PID namespace of its own
// (CLONE_NEWPID; for a node that is not root, inside a user namespace
// that maps only the node's own user and group to themselves, so files
// and sockets see the same ids). When it exits, or is killed, the kernel
// kills every process left in the namespace: a child that left the
// handler's process group (setsid) or was orphaned by a double fork
// ends with it, instead of outliving the plugin. Inside, the handler is
// pid 1: a signal the node sends it is delivered only if the handler
// catches it, and it is the reaper of its orphans. A handler that
// neither catches nor ignores SIGTERM (a shell script without a trap, a
// Python program) would die of it anywhere else; there the kernel drops
// it. When such a handler has no children left (termDropped), the node
// kills it at once, which is what SIGTERM would have done, instead of
// after the grace period; one with children keeps the grace, so they
// can act on the SIGTERM they did get (its end would kill them).
//
// Where the host refuses the namespaces (user namespaces turned off, a
// container's seccomp profile), handlers start as before, in a process
// group of their own: kill still reaches the group, and a child that
// left it outlives the plugin. The node logs that once.
var uncontained atomic.Bool

// handlerAttr is the handler's process attributes: contained (above)
// unless the host refused that before, and in a process group of its
// own either way.
func handlerAttr() (attr *syscall.SysProcAttr, contained bool) {
	attr = groupAttr()
	if uncontained.Load() {
		return attr, false
	}
	attr.Cloneflags = syscall.CLONE_NEWPID
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return attr, true
}

// groupAttr starts a handler in a process group of its own, a kill of
// the group reaching its children too, and killed (SIGKILL) by the
// kernel when the node's thread that started it ends: the node dies
// (SIGKILL, the OOM killer, a crash) without stopping it, since the Go
// runtime ends a thread only with the node or with a goroutine that
// locked it, which the node's code does not do. A contained handler's
// namespace ends with it.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// noteUncontained makes later handlers start uncontained: the host
// refused the namespaces.
func noteUncontained() { uncontained.Store(true) }

// mayBeRefusedNamespaces reports whether err, from starting a contained
// handler, may be the host refusing the namespaces (startHandler then
// tries without them to tell).
func mayBeRefusedNamespaces(err error) bool {
	for _, e := range []error{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS, syscall.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// termDropped reports whether the SIGTERM just sent to pid was dropped
// by the kernel and nothing else in its namespace waits on it: pid is
// the first process of a PID namespace of its own with SIGTERM's
// default action, and it has no children. false when that cannot be
// read.
func termDropped(pid int) bool {
	return termDefaultAsFirst(pid) && !hasChildren(pid)
}

// hasChildren reports whether any thread of pid has a child
// (/proc/pid/task/*/children); true when that cannot be read.
func hasChildren(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return true
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil || len(bytes.TrimSpace(b)) > 0 {
			return true
		}
	}
	return false
}

// termDefaultAsFirst reports whether pid is its PID namespace's first
// process (the last of its NSpid ids is 1) with SIGTERM's default
// action (in neither SigCgt nor SigIgn), from /proc/pid/status.
func termDefaultAsFirst(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	field := map[string]string{}
	for line := range bytes.Lines(b) {
		if k, v, ok := strings.Cut(string(line), ":"); ok {
			field[k] = strings.TrimSpace(v)
		}
	}
	ids := strings.Fields(field["NSpid"])
	if len(ids) < 2 || ids[len(ids)-1] != "1" {
		return false
	}
	ign, err1 := strconv.ParseUint(field["SigIgn"], 16, 64)
	cgt, err2 := strconv.ParseUint(field["SigCgt"], 16, 64)
	const term = uint64(1) << (syscall.SIGTERM - 1)
	return err1 == nil && err2 == nil && (ign|cgt)&term == 0
}
