package admin

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"

	"peerdns/actors/settings"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A body or a SUBNETS value of the wrong JSON shape is a 400 whose
// errors say so in JSON's terms, not in the node's Go types.
func TestUpdateSettingsErrorsNameNoGoTypes(t *testing.T) {
	sys, quiet := quietSystem(t)
	ledger := stubLedger(t, sys, 0, func(msg any) any {
		switch msg.(type) {
		case *messages.GetSubnets:
			return &messages.GetSubnetsReply{}
		case *messages.SetSubnets:
			return &messages.SetSubnetsReply{}
		}
		return nil
	})
	set := sys.Root.Spawn(settings.Props(settings.Deps{Ledger: ledger, Log: quiet}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(set).Wait() })
	addr := serveAdmin(t, Deps{Root: sys.Root, Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet,
		Register: []func(*router.Router){func(r *router.Router) { RegisterSettings(r, quiet, sys.Root, set) }}})

	for _, tt := range []struct{ name, body, want string }{
		{"body an array", `[]`, "the body must be a JSON object, got array"},
		{"settings a number", `{"settings":5}`, `field "settings" must be a JSON object, got number`},
		{"SUBNETS an object", `{"settings":{"SUBNETS":"{}"}}`, "SUBNETS: not a JSON array of subnets: the value must be an array, got object"},
		{"SUBNETS base a number", `{"settings":{"SUBNETS":"[{\"base\":1,\"cidr\":24,\"startIndex\":2}]"}}`, `field "base" must be a string, got number`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := testutil.Call(t, "POST", "http://"+addr+"/api/update-settings", tt.body)
			var got struct{ Errors []string }
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("update-settings %s = %d %s: %v", tt.body, code, body, err)
			}
			msg := strings.Join(got.Errors, "; ")
			if code != 400 || !strings.Contains(msg, tt.want) || strings.Contains(msg, "Go ") || strings.Contains(msg, "messages.") {
				t.Fatalf("update-settings %s = %d %q, want 400 saying %q in JSON's terms", tt.body, code, msg, tt.want)
			}
		})
	}
}

// A body with data after its object is refused as a whole, as every
// other body is, and changes nothing.
func TestUpdateSettingsRefusesTrailingData(t *testing.T) {
	sys, quiet := quietSystem(t)
	set := sys.Root.Spawn(settings.Props(settings.Deps{Log: quiet}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(set).Wait() })
	addr := serveAdmin(t, Deps{Root: sys.Root, Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet,
		Register: []func(*router.Router){func(r *router.Router) { RegisterSettings(r, quiet, sys.Root, set) }}})

	for _, body := range []string{`{"settings":{"LOG_LEVEL":"debug"}} {"settings":{}}`, `{"settings":{"LOG_LEVEL":"debug"}}x`} {
		code, got := testutil.Call(t, "POST", "http://"+addr+"/api/update-settings", body)
		if code != 400 || !strings.Contains(got, "after top-level value") {
			t.Fatalf("update-settings %s = %d %s, want 400 naming the data after the object", body, code, got)
		}
	}
	var cur struct{ Settings map[string]string }
	testutil.MustJSON(t, "GET", "http://"+addr+"/api/settings", "", 200, &cur)
	if v := cur.Settings[settings.LogLevel]; v == "debug" {
		t.Fatalf("LOG_LEVEL = %q after refused updates, want it unchanged", v)
	}
}

// An update queued behind one that waits for a slow ledger (SUBNETS)
// gets the truth: a 500 means its values were not saved, not that the
// client stopped waiting for an update the node saves a moment later.
func TestUpdateSettingsQueuedPastDeadlineChangesNothing(t *testing.T) {
	sys, quiet := quietSystem(t)
	// A ledger that takes 3 s to set subnets: the first update waits 3 s,
	// the second starts then and waits 3 s more, past the 5 s the client
	// waits (and under the actor's own 5 s wait for the ledger).
	var sets atomic.Int64
	ledger := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *messages.GetSubnets:
			c.Respond(&messages.GetSubnetsReply{})
		case *messages.SetSubnets:
			sets.Add(1)
			to := c.Sender()
			time.AfterFunc(3*time.Second, func() { sys.Root.Send(to, &messages.SetSubnetsReply{}) })
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(ledger).Wait() })
	set := sys.Root.Spawn(settings.Props(settings.Deps{Ledger: ledger, Log: quiet}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(set).Wait() })
	addr := serveAdmin(t, Deps{Root: sys.Root, Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet,
		Register: []func(*router.Router){func(r *router.Router) { RegisterSettings(r, quiet, sys.Root, set) }}})
	url := "http://" + addr + "/api/update-settings"
	subnets := `"SUBNETS":"[{\"base\":\"10.9.0.0\",\"cidr\":24,\"startIndex\":2}]"`

	first := make(chan int, 1)
	go func() { // not testutil.Call: it may not fail the test off its goroutine
		resp, err := testutil.Client.Post(url, "application/json", strings.NewReader(`{"settings":{`+subnets+`}}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// Once the first waits for the ledger, the second queues behind it.
	testutil.Eventually(t, 2*time.Second, func() error {
		if sets.Load() == 0 {
			return errors.New("the first update has not reached the ledger")
		}
		return nil
	})
	code, body := testutil.Call(t, "POST", url, `{"settings":{"LOG_LEVEL":"debug",`+subnets+`}}`)
	if c := <-first; c != 200 {
		t.Fatalf("first update = %d, want 200", c)
	}
	if code == 200 {
		t.Fatalf("second update = 200 %s, want a failure: it cannot finish in the time the client waits", body)
	}
	// Mail is handled in order: this update runs after the second is done.
	if c, b := testutil.Call(t, "POST", url, `{"settings":{"DNS_QUERY_LOG":"true"}}`); c != 200 {
		t.Fatalf("third update = %d %s", c, b)
	}
	var cur struct{ Settings map[string]string }
	testutil.MustJSON(t, "GET", "http://"+addr+"/api/settings", "", 200, &cur)
	if v := cur.Settings[settings.LogLevel]; v == "debug" {
		t.Fatalf("second update answered %d %s, then LOG_LEVEL = %q: saved after the client was told it failed", code, body, v)
	}
}
