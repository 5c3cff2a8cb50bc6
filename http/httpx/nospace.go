package httpx

import (
	"errors"
	"syscall"

	"github.com/valyala/fasthttp"
)

// A full disk is not a server bug: a request that failed because a store,
// a backup or a certificate could not be written for want of space is
// answered 507 Insufficient Storage (RFC 4918) with a message that says
// so, wherever the handler built its 500 (Errorf, Internal, or a plain
// error to WriteError). Nothing the node acknowledged before is lost
// (a failed buntdb commit is rolled back and truncated away), reads go on,
// and the same request succeeds once space is back.

// IsNoSpace reports whether err (or anything it wraps) is a full disk
// (ENOSPC) or an exhausted quota (EDQUOT).
func IsNoSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}

// noSpaceArg is the first argument that is a no-space error, or nil.
func noSpaceArg(a []any) error {
	for _, v := range a {
		if err, ok := v.(error); ok && IsNoSpace(err) {
			return err
		}
	}
	return nil
}

// insufficientStorage turns e, a 500, into a 507 that names the cause.
func insufficientStorage(e *Error, cause error) *Error {
	e.Status = fasthttp.StatusInsufficientStorage
	e.Msg = "insufficient storage: the node's disk is full, nothing was written (" + e.Msg + "); free space and retry"
	if e.Err == nil {
		e.Err = cause
	}
	return e
}
