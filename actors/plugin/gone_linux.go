package plugin

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processGone is closed once the process pid has exited. It does not
// reap it (WNOWAIT): cmd.Wait still does, and reports its status.
func processGone(pid int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		var info unix.Siginfo
		for errors.Is(unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil), unix.EINTR) {
		}
	}()
	return ch
}
