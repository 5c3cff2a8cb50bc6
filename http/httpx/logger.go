package httpx

import (
	"fmt"
	"log/slog"
)

// Logger adapts a slog.Logger to fasthttp's Logger. fasthttp reports
// each connection it gives up on (a malformed request, a body over the
// limit, a timeout) through it; without one it writes to the standard
// logger, so any client could fill the process's stderr. The errors are
// already answered with their status, so they go out at debug level.
type Logger struct{ L *slog.Logger }

// Printf is fasthttp.Logger.
func (f Logger) Printf(format string, args ...any) {
	if f.L != nil {
		f.L.Debug("fasthttp", "msg", fmt.Sprintf(format, args...))
	}
}
