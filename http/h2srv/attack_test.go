package h2srv

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestBigFramesStayInPools: a client that allows the largest frames and
// windows (SETTINGS_MAX_FRAME_SIZE 2^24-1) does not make a handler's one
// large Write one DATA frame: the connection's pending output would hold
// all of it at once, past the output pools' buffers (bigOutput), for as
// long as the client does not read. Every DATA frame fits in what a
// bigOutput buffer has beyond maxPending.
func TestBigFramesStayInPools(t *testing.T) {
	const size = 4 << 20
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, size))
	}))
	rc := newRawClient(t, ts.addr,
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: maxMaxFrameSize},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	if err := rc.fr.WriteWindowUpdate(0, maxWindow-initialWindow); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("GET", "/"))
	largest, got := 0, 0
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
			largest = max(largest, len(d.Data()))
			got += len(d.Data())
			return d.StreamEnded()
		}
		return false
	})
	if got != size {
		t.Fatalf("body %d bytes, want %d", got, size)
	}
	if limit := bigOutput - maxPending - 9; largest > limit {
		t.Fatalf("a DATA frame of %d bytes: the pending output held more than a bigOutput buffer (frames of at most %d fit)", largest, limit)
	}
}
