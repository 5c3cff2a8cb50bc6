//go:build !linux

package agent

import "errors"

// releaseExecutablePages is Linux-only (madvise MADV_PAGEOUT); see
// pages_linux.go.
func releaseExecutablePages() (before, after int64, err error) {
	return 0, 0, errors.New("releasing the executable's pages needs Linux")
}
