package httpx

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	Logger{L: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}.
		Printf("error when serving connection %q: %v", "127.0.0.1:1", "body size exceeds the given limit")
	if out := buf.String(); !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "body size exceeds the given limit") {
		t.Fatalf("logged %q", out)
	}
	Logger{}.Printf("no logger: %d", 1) // dropped, no panic
}
