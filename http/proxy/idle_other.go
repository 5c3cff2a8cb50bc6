//go:build !linux

package proxy

// idlePeek and idleWatch are Linux's (idle_linux.go); elsewhere an idle
// connection is not looked into.
type idlePeek struct{}

type idleWatch struct{}

func newIdleWatch() *idleWatch { return new(idleWatch) }

func (w *idleWatch) add(*movingDeadlines)              {}
func (w *idleWatch) drop(*movingDeadlines)             {}
func (w *idleWatch) spoke(*movingDeadlines, bool) bool { return false }
