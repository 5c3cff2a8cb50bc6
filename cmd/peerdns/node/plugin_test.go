package node

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

var (
	notesOnce sync.Once
	notesBin  string
	notesErr  error
)

// notesBinary builds examples/plugins/notes once per test run.
func notesBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH (needed to build examples/plugins/notes for the plugin tests)")
	}
	notesOnce.Do(func() {
		dir, err := os.MkdirTemp("", "peerdns-notes-*")
		if err != nil {
			notesErr = err
			return
		}
		notesBin = filepath.Join(dir, "notes")
		out, err := exec.Command(goTool, "build", "-o", notesBin, "peerdns/examples/plugins/notes").CombinedOutput()
		if err != nil {
			notesErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if notesErr != nil {
		t.Fatal(notesErr)
	}
	return notesBin
}

// installNotes copies the example plugin into the node's DATA/plugins and
// has the node read the folder again.
func installNotes(t *testing.T, n *Node) {
	t.Helper()
	bin := notesBinary(t)
	dst := filepath.Join(n.orig.Data, "plugins", "notes")
	src := filepath.Join("..", "..", "..", "examples", "plugins", "notes")
	for _, f := range []string{"plugin.json", filepath.Join("www", "index.html")} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "notes"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	mustJSON(t, "POST", "http://"+n.AdminAddr()+"/api/plugins/reload", "", 200, nil)
}

type pluginInfo struct {
	Domain, Name, Version, Status, Error string
	HasHandler, HasWww, HasDatabase      bool
	Actions                              []struct{ Name string }
	Settings                             map[string]struct {
		Type  string
		Value any
	}
}

func pluginOn(t *testing.T, n *Node, domain string) pluginInfo {
	t.Helper()
	var p pluginInfo
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/plugins/"+domain, "", 200, &p)
	return p
}

// action runs an action until the handler answers (it may still be
// starting) and returns the result.
func action(t *testing.T, n *Node, domain, name, body string) json.RawMessage {
	t.Helper()
	var res json.RawMessage
	testutil.Eventually(t, 15*time.Second, func() error {
		code, out := call(t, "POST", "http://"+n.AdminAddr()+"/api/plugins/"+domain+"/actions/"+name, body)
		if code != 200 {
			return fmt.Errorf("action %s: %d %s", name, code, out)
		}
		var r struct {
			Success bool
			Result  json.RawMessage
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || !r.Success {
			return fmt.Errorf("action %s: %s", name, out)
		}
		res = r.Result
		return nil
	})
	return res
}

// The example plugin as a real child process: listed with its fields,
// its domain internal, actions, settings kept across a restart, a crash
// that the node restarts, bad requests, and peer.call between two nodes.
func TestNotesPlugin(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	ws := dialWS(t, a.AdminAddr(), 0)
	for _, n := range nodes {
		installNotes(t, n)
	}
	// The handler's log call at init reaches WebSocket clients.
	pl := readUntil(t, ws, ofType("plugin-log"))
	if pl["domain"] != "notes.p2p" || !strings.Contains(fmt.Sprint(pl["message"]), "notes plugin started") {
		t.Fatalf("plugin-log: %v", pl)
	}
	base := "http://" + a.AdminAddr()
	testutil.Eventually(t, 15*time.Second, func() error {
		if p := pluginOn(t, a, "notes.p2p"); p.Status != "loaded" {
			return fmt.Errorf("status %s (%s)", p.Status, p.Error)
		}
		return nil
	})
	p := pluginOn(t, a, "notes.p2p")
	if p.Name != "notes" || !p.HasHandler || !p.HasWww || !p.HasDatabase || len(p.Actions) != 3 || p.Settings["greeting"].Value != "hello" {
		t.Fatalf("plugin: %+v", p)
	}
	var list struct{ Plugins []pluginInfo }
	mustJSON(t, "GET", base+"/api/plugins", "", 200, &list)
	if len(list.Plugins) != 2 || list.Plugins[0].Domain != "notes.p2p" || list.Plugins[1].Status != "static" {
		t.Fatalf("plugins: %+v", list.Plugins)
	}
	// Its domain is internal: listed, and not claimable.
	if code, body := call(t, "POST", base+"/api/add-domain", `{"domain":"notes.p2p","hash":"`+hashA+`"}`); code != 500 || !strings.Contains(body, "internal") {
		t.Fatalf("claiming the plugin's domain: %d %s", code, body)
	}
	if got := string(action(t, a, "notes.p2p", "count", "")); got != `{"notes":0}` {
		t.Fatalf("count = %s", got)
	}

	// peer.call: A's plugin pings B's.
	res := action(t, a, "notes.p2p", "ping-peer", `{"peer":"`+b.ID()+`"}`)
	if !strings.Contains(string(res), `"pong":"notes.p2p"`) || !strings.Contains(string(res), `"from":"`+b.ID()+`"`) || !strings.Contains(string(res), `"caller":"`+a.ID()+`"`) {
		t.Fatalf("ping-peer = %s", res)
	}

	// Bad requests.
	for path, want := range map[string]int{
		"/api/plugins/notes.p2p/actions/nope": 404, "/api/plugins/none.p2p/actions/count": 404,
		"/api/plugins/bad..name/actions/count": 400, "/api/plugins/none.p2p/start": 404,
	} {
		if code, body := call(t, "POST", base+path, ""); code != want {
			t.Errorf("POST %s: %d %s, want %d", path, code, body, want)
		}
	}
	if code, body := call(t, "POST", base+"/api/plugins/notes.p2p/settings", `{"greeting":5}`); code != 400 || !strings.Contains(body, "greeting") {
		t.Fatalf("bad setting: %d %s", code, body)
	}
	mustJSON(t, "POST", base+"/api/plugins/notes.p2p/settings", `{"greeting":"hi there"}`, 200, nil)

	// A crash: the node starts the handler again.
	if code, _ := call(t, "POST", base+"/api/plugins/notes.p2p/actions/crash", ""); code != 500 && code != 200 {
		t.Fatalf("crash action: %d", code)
	}
	if got := string(action(t, a, "notes.p2p", "count", "")); got != `{"notes":0}` {
		t.Fatalf("count after the crash = %s", got)
	}

	// Stop, then a node restart: stopped stays stopped, the setting stays.
	mustJSON(t, "POST", base+"/api/plugins/notes.p2p/stop", "", 200, nil)
	if p := pluginOn(t, a, "notes.p2p"); p.Status != "stopped" {
		t.Fatalf("after stop: %+v", p)
	}
	cfg := a.orig
	a.Stop()
	a2, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Stop)
	p = pluginOn(t, a2, "notes.p2p")
	if p.Status != "stopped" || p.Settings["greeting"].Value != "hi there" {
		t.Fatalf("after restart: %+v", p)
	}
	mustJSON(t, "POST", "http://"+a2.AdminAddr()+"/api/plugins/notes.p2p/start", "", 200, nil)
	if got := string(action(t, a2, "notes.p2p", "count", "")); got != `{"notes":0}` {
		t.Fatalf("count after restart = %s", got)
	}
}

// A plugin whose domain is already claimed in the ledger is stopped with
// the reason, and the claim keeps working.
func TestPluginDomainAlreadyClaimed(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "notes.p2p", hashA)
	installNotes(t, n)
	testutil.Eventually(t, 10*time.Second, func() error {
		p := pluginOn(t, n, "notes.p2p")
		if p.Status != "stopped" || !strings.Contains(p.Error, "claimed") {
			return fmt.Errorf("plugin: %+v", p)
		}
		return nil
	})
	if cs := consensusOn(t, n, "notes.p2p"); cs.Status != "resolved" {
		t.Fatalf("the claim: %+v", cs)
	}
}

// The built-in profile plugin is listed with the spec's Plugin fields:
// actions is an array (empty: it has none) and settings an object, in
// the list and on its own, as for a plugin from DATA/plugins.
func TestStaticPluginFields(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var list struct{ Plugins []map[string]json.RawMessage }
	mustJSON(t, "GET", base+"/api/plugins", "", 200, &list)
	var one map[string]json.RawMessage
	mustJSON(t, "GET", base+"/api/plugins/profile.p2p", "", 200, &one)
	var fromList map[string]json.RawMessage
	for _, p := range list.Plugins {
		if string(p["domain"]) == `"profile.p2p"` {
			fromList = p
		}
	}
	if fromList == nil {
		t.Fatalf("profile.p2p not in GET /api/plugins: %v", list)
	}
	for where, p := range map[string]map[string]json.RawMessage{"GET /api/plugins": fromList, "GET /api/plugins/profile.p2p": one} {
		if string(p["status"]) != `"static"` {
			t.Errorf("%s: status = %s, want \"static\"", where, p["status"])
		}
		if a := strings.TrimSpace(string(p["actions"])); !strings.HasPrefix(a, "[") {
			t.Errorf("%s: actions = %s, want an array", where, a)
		}
		if s := strings.TrimSpace(string(p["settings"])); !strings.HasPrefix(s, "{") {
			t.Errorf("%s: settings = %s, want an object", where, s)
		}
	}
}
