//go:build unix

package pluginweb

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A FIFO the plugin put where staticFile found a regular file is not
// opened for a writer that never comes: sendFile declines it at once.
func TestSendFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "index.html")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() {
		var ctx fasthttp.RequestCtx
		done <- sendFile(&ctx, fifo)
	}()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("sendFile served a FIFO")
		}
	case <-time.After(5 * time.Second):
		// Free the blocked open so the test binary can end.
		if f, err := openWriteNonblock(fifo); err == nil {
			f()
		}
		t.Fatal("sendFile blocked on a FIFO")
	}
}

func openWriteNonblock(p string) (func(), error) {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return func() { syscall.Close(fd) }, nil
}
