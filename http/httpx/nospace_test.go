package httpx

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"
)

// A 500 whose cause is a full disk is a 507 that says so; other 500s
// and other statuses stay as they are.
func TestNoSpaceIs507(t *testing.T) {
	full := fmt.Errorf("store claim: %w", &fs.PathError{Op: "write", Path: "ledger.db", Err: syscall.ENOSPC})
	for _, c := range []struct {
		err  error
		want int
	}{
		{Internal("%v", full), 507},
		{Internal("settings: %v", fmt.Errorf("wrapped: %w", syscall.EDQUOT)), 507},
		{full, 507}, // a plain error to WriteError
		{Internal("%v", errors.New("no space left on device")), 500}, // text alone is not a cause
		{Errorf(400, "%v", full), 400},
		{Internal("%v", errors.New("other")), 500},
	} {
		var ctx fasthttp.RequestCtx
		WriteError(&ctx, nil, c.err)
		if got := ctx.Response.StatusCode(); got != c.want {
			t.Errorf("%v: status %d, want %d", c.err, got, c.want)
		}
		if body := string(ctx.Response.Body()); c.want == 507 && !strings.Contains(body, "disk is full") {
			t.Errorf("%v: body %q does not say the disk is full", c.err, body)
		}
	}
}
