package admin

// Stats routes: GET /api/stats (the latest sample) and
// /api/stats/historical (one sample a minute), and the WebSocket's
// stats-snapshot message. The stats actor (actors/stats) samples; the
// composition root hands its published snapshot and history in as a
// StatsSource.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
)

// MaxHistoryMinutes bounds ?minutes= (1..1440; outside is a 400).
const MaxHistoryMinutes = 1440

// StatsSource is what the stats routes read.
type StatsSource interface {
	// Latest is the last sample's JSON; false before the first.
	Latest() ([]byte, bool)
	// History is the samples kept for the last minutes, oldest first.
	History(minutes int) []json.RawMessage
}

// RegisterStats registers GET /api/stats and /api/stats/historical.
func RegisterStats(r *router.Router, log *slog.Logger, src StatsSource) {
	r.GET("/api/stats", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		cur, ok := src.Latest()
		if !ok {
			return httpx.Internal("no sample yet")
		}
		return httpx.JSONBytes(ctx, cur)
	}))
	r.GET("/api/stats/historical", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		minutes := 60
		if v := ctx.QueryArgs().Peek("minutes"); len(v) > 0 {
			m, err := strconv.Atoi(string(v))
			if err != nil || m < 1 || m > MaxHistoryMinutes {
				return httpx.BadRequest("minutes must be a whole number 1..%d", MaxHistoryMinutes)
			}
			minutes = m
		}
		return httpx.JSON(ctx, 200, src.History(minutes))
	}))
}

// StatsSnapshot is the WebSocket's stats-snapshot message: the latest
// sample, minutes of history (default 60), health and status.
func (s *Server) StatsSnapshot(src StatsSource, minutes int) ([]byte, error) {
	if minutes <= 0 {
		minutes = 60
	}
	if minutes > MaxHistoryMinutes {
		return nil, fmt.Errorf("minutes must be 1..%d", MaxHistoryMinutes)
	}
	cur, ok := src.Latest()
	if !ok {
		return nil, fmt.Errorf("no sample yet")
	}
	_, health := s.Health("liveness")
	status, err := s.Status()
	if err != nil {
		status = map[string]any{"error": err.Error()}
	}
	return json.Marshal(map[string]any{"type": "stats-snapshot", "stats": json.RawMessage(cur), "historical": src.History(minutes),
		"health": health, "status": status, "minutes": minutes})
}
