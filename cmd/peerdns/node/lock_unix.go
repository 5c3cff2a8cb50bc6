//go:build unix

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockName is the file in the data folder that a running node (or, in
// DATA/agent, agent) holds an exclusive lock on, so a second one on the
// same folder (which would share its stores and identity) refuses to
// start.
const lockName = "lock"

// dataLock is the held lock; release unlocks and closes it.
type dataLock struct{ f *os.File }

// lockData takes the exclusive, non-blocking lock on dir for a running
// what ("node", "agent"). The kernel drops the lock when the process
// dies, so a crash never leaves a stale lock.
func lockData(dir, what string) (*dataLock, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data folder %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data folder %s is in use by another running peerdns %s (give each %s its own --data)", dir, what, what)
		}
		return nil, fmt.Errorf("lock data folder %s: %w", dir, err)
	}
	// The pid is for the operator who wonders who holds it.
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return &dataLock{f: f}, nil
}

func (l *dataLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
