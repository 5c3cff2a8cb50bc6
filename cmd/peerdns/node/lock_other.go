//go:build !unix

package node

// dataLock is a no-op where flock(2) does not exist: the node runs, but a
// second node (or agent) on the same folder is not refused there.
type dataLock struct{}

func lockData(string, string) (*dataLock, error) { return &dataLock{}, nil }

func (*dataLock) release() {}
