//go:build !linux

package proxy

// idlePeek is Linux's (idle_linux.go); elsewhere an idle connection is
// not looked into.
type idlePeek struct{}

// idleReadable reports false: see idle_linux.go.
func (c *movingDeadlines) idleReadable() bool { return false }
