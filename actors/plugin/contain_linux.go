package plugin

import (
	"errors"
	"os"
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
// catches it (a shell script that does not trap SIGTERM gets SIGKILL
// after the grace period), and it is the reaper of its orphans.
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
