package plugin

import (
	"fmt"
	"os"
	"syscall"
)

// openRegular opens path for reading if it is a regular file. It is
// opened without blocking and checked once open: a handler owns its
// folders and may swap a file for a FIFO at any moment (a check before
// the open could see the file it swaps right after), and a FIFO's
// blocking open would hold the plugins supervisor (every plugin, backups,
// shutdown) until someone writes to it; a device would be read without
// end.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
