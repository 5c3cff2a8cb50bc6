//go:build !linux

package proxy

// idlePeek and idleWatch are Linux's (idle_linux.go); elsewhere an idle
// connection is not looked into.
type idlePeek struct{}

type idleWatch struct{}

func newIdleWatch() *idleWatch { return nil }

func (w *idleWatch) add(*movingDeadlines)        {}
func (w *idleWatch) drop(*movingDeadlines)       {}
func (w *idleWatch) spoke(*movingDeadlines) bool { return false }

// idleReadable reports false: see idle_linux.go.
func (c *movingDeadlines) idleReadable() bool { return false }
