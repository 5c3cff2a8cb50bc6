// Package runwork is the frame of a bench command whose run starts
// processes and leaves their logs in a work folder: the folder, a context
// that Ctrl-C, SIGTERM or a time limit ends (so the run stops and cleans
// up its namespaces and processes), and the folder removed afterwards
// unless the run failed or the operator asked to keep it.
package runwork

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Run makes a work folder (os.MkdirTemp with pattern), runs fn in it
// with a context ended by SIGINT, SIGTERM or, when limit > 0, after
// limit, and returns fn's exit code for the command. A failed run (a
// code other than 0), or any run when keep is set, keeps the folder and
// says where it is (what it holds is what).
func Run(pattern, what string, limit time.Duration, keep bool, fn func(ctx context.Context, work string) (code int)) int {
	work, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if code := fn(ctx, work); code != 0 {
		fmt.Fprintf(os.Stderr, "%s in %s\n", what, work)
		return code
	}
	if keep {
		fmt.Printf("%s in %s\n", what, work)
		return 0
	}
	os.RemoveAll(work)
	return 0
}
