package httpx

import (
	"errors"
	"net"
	"strings"

	"github.com/valyala/fasthttp"
)

// ReadErrorStatus is the status for a request fasthttp could not read
// (a server's ErrorHandler): 413 for a body over the server's limit, 431
// for a head over its read buffer, 408 for a request that did not arrive
// in time (a slowloris client), 400 for the rest. fasthttp's own default
// answers 400 to all of them.
func ReadErrorStatus(err error) int {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return fasthttp.StatusRequestEntityTooLarge
	case errors.As(err, &small) || strings.Contains(err.Error(), "small read buffer"):
		return fasthttp.StatusRequestHeaderFieldsTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		return fasthttp.StatusRequestTimeout
	}
	return fasthttp.StatusBadRequest
}
