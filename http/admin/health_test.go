package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// fakePeers is a PeerSource with a fixed answer.
type fakePeers struct{ healthy bool }

func (f fakePeers) Peers() ([]string, error)   { return []string{}, nil }
func (f fakePeers) Status() (bool, int, error) { return true, 0, nil }
func (f fakePeers) Healthy() bool              { return f.healthy }

// sidecarLedger answers GetSidecarStatus with st, or never when st is nil.
func sidecarLedger(t *testing.T, sys *actor.ActorSystem, st *messages.SidecarStatus) *actor.PID {
	t.Helper()
	return stubLedger(t, sys, 0, func(msg any) any {
		if _, ok := msg.(*messages.GetSidecarStatus); ok && st != nil {
			return &messages.GetSidecarStatusReply{Status: *st}
		}
		return nil
	})
}

type healthBody struct {
	Status       string                     `json:"status"`
	Probe        string                     `json:"probe"`
	Dependencies map[string]map[string]bool `json:"dependencies"`
}

// The dataStore dependency is what the ledger says of its store, and a
// ledger that does not answer counts as a failed store.
func TestHealthDataStore(t *testing.T) {
	sys, quiet := quietSystem(t)
	tests := []struct {
		name       string
		status     *messages.SidecarStatus
		probe      string
		wantCode   int
		wantStatus string
		wantStore  bool
	}{
		{"store open, liveness", &messages.SidecarStatus{Open: true}, "liveness", 200, "healthy", true},
		{"store open and bootstrapped, readiness", &messages.SidecarStatus{Open: true, BootstrapComplete: true}, "readiness", 200, "healthy", true},
		{"store open, not bootstrapped", &messages.SidecarStatus{Open: true}, "readiness", 503, "not_ready", true},
		{"store closed", &messages.SidecarStatus{Open: false, BootstrapComplete: true}, "liveness", 503, "degraded", false},
		{"store closed, readiness", &messages.SidecarStatus{Open: false, BootstrapComplete: true}, "readiness", 503, "degraded", false},
		{"ledger does not answer", nil, "liveness", 503, "degraded", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Deps{Root: sys.Root, Ledger: sidecarLedger(t, sys, tt.status), Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet})
			s.healthTimeout = 100 * time.Millisecond
			addr := serveServer(t, s)
			code, body := testutil.Call(t, "GET", "http://"+addr+"/api/health?probe="+tt.probe, "")
			var h healthBody
			if err := json.Unmarshal([]byte(body), &h); err != nil {
				t.Fatalf("health body %q: %v", body, err)
			}
			if code != tt.wantCode || h.Status != tt.wantStatus || h.Probe != tt.probe || h.Dependencies["dataStore"]["healthy"] != tt.wantStore {
				t.Fatalf("GET /api/health?probe=%s = %d %s, want %d status %s dataStore %v", tt.probe, code, body, tt.wantCode, tt.wantStatus, tt.wantStore)
			}
		})
	}
}

// The summed response time behind the stats' avgResponseTime counts
// requests faster than a millisecond for what they took, not for 0:
// hundreds of requests, each taking some microseconds, sum to a
// millisecond or more.
func TestRequestTimeCountsSubMillisecondRequests(t *testing.T) {
	sys, quiet := quietSystem(t)
	const n = 400
	s := New(Deps{Root: sys.Root, Ledger: sidecarLedger(t, sys, &messages.SidecarStatus{Open: true}), Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet})
	addr := serveServer(t, s)
	for range n {
		if code, body := testutil.Call(t, "GET", "http://"+addr+"/api/health", ""); code != 200 {
			t.Fatalf("GET /api/health = %d %s", code, body)
		}
	}
	if c := s.Requests(); c.Total != n || c.TotalMillis < 1 {
		t.Fatalf("after %d requests: counters %+v, want %d requests and their time", n, c, n)
	}
}
