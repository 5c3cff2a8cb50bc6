// Package plugin is the plugins actor family: a supervisor (Actor) that
// owns the plugin folders of DATA/plugins and the built-in static
// plugins, and one child actor per loaded plugin that owns its handler
// process (runner). The protocol is ARCHITECTURE.md's "Plugins": a
// handler is a child process speaking JSON-RPC 2.0, one object per line,
// over stdin/stdout (rpc.go), with the calls init, handle, action and
// settings.changed from the node and db.*, log, peer.call and peer.send
// from the plugin.
//
// # What it owns
//
//   - The list: each folder of DATA/plugins with a plugin.json is a
//     plugin; a bad manifest lists it as stopped with the reason (Error)
//     and the node runs on. RescanPlugins (POST /api/plugins/reload)
//     reads the folder again: new plugins start, removed ones stop.
//   - Status: loaded (its handler runs, or it has only www), stopped
//     (by request, a bad manifest, a refused domain or a crash loop),
//     static (built into the binary). A stop by request is saved in
//     node.db ("plugin:stopped:<domain>") and lasts across restarts.
//   - Internal domains: the domains of the folder plugins that are not
//     stopped go to the ledger (messages.SetInternalDomains, owner
//     "plugins"; the static plugins' domains are the node's own, given to
//     the ledger at start); a domain the ledger refuses (claimed, the admin domain)
//     stops its plugin with the reason. Two plugins with one domain: the
//     first by folder name wins, the other is stopped.
//   - Settings: values in node.db ("plugin:settings:<domain>", JSON),
//     validated against the manifest's types, sent to the handler as
//     settings.changed and in init.
//   - The Table the edge proxy reads (domain → *Runtime), published on
//     every change, so a request costs no actor round trip.
//   - Stopping: stop, reload, a rescan that drops a folder, a refused
//     domain and a crash loop stop the plugin's child actor and answer
//     at once; the child waits for the handler to exit (SIGTERM, SIGKILL
//     after 2 s) on its own goroutine, and its Terminated tells the
//     supervisor the process is gone. Until then the plugin's database
//     stays open for the handler's last calls, and a start or reload of
//     the same domain is listed as loaded but its handler (and database)
//     start only then: calls in between fail as while a handler
//     restarts (502).
//
// It must never: block Receive on a handler (calls go through the
// Runtime from the caller's goroutine; stopping one does not wait for
// it), let a plugin reach another plugin's data or the node's stores
// (db.* only touch its own file), or run a handler outside its folder.
package plugin

import (
	"peerdns/internal/view"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/store"
	"peerdns/messages"
	"peerdns/transport"
)

// Static is a plugin built into the binary (status static): no folder,
// no process; Handle answers its requests in-process.
type Static struct {
	Manifest Manifest
	Handle   func(ctx context.Context, req *HandleRequest) (*HandleResponse, error)
}

// PeerCaller reaches the same plugin on another peer (peer.call and
// peer.send); nil: those calls fail with a clear error.
type PeerCaller interface {
	CallPlugin(ctx context.Context, peer, domain, method string, params json.RawMessage, wait bool) (json.RawMessage, error)
}

// Deps are what the plugins supervisor needs from the node.
type Deps struct {
	Dir     string     // DATA/plugins
	DataDir string     // DATA/plugin-data: one folder per plugin with a database
	Store   *store.DB  // node.db
	Ledger  *actor.PID // internal domains; nil: none registered
	Address netip.Addr // what DNS answers for plugin domains (the edge proxy)
	PeerID  string
	Static  []Static
	Peers   PeerCaller
	Log     *slog.Logger // the plugins channel
	Table   *Table       // published runtimes; required
	// Events, when set, gets each line a handler logs (its log calls and
	// its stderr) as a plugin-log hint for the WebSocket clients, at most
	// pluginLogRate a second per plugin (the rest only reach the channel).
	Events func(*messages.Hint)

	CallTimeout time.Duration     // init, handle and action calls [30s]
	Backoff     transport.Backoff // handler restarts [200ms .. 10s]
	CrashLoop   int               // exits within CrashWindow that stop a plugin [5]
	CrashWindow time.Duration     // [1m]
}

// Table is the published map of loaded plugins' runtimes by domain
// (the generic publisher: the edge and the admin API Load it lock-free).
type Table struct {
	m view.Publisher[map[string]*Runtime]
}

// Lookup finds the runtime of a loaded plugin's domain (lower case, no
// trailing dot).
func (t *Table) Lookup(domain string) *Runtime {
	m := t.m.Load()
	if m == nil {
		return nil
	}
	return (*m)[domain]
}

// All returns every published runtime.
func (t *Table) All() []*Runtime {
	m := t.m.Load()
	if m == nil {
		return nil
	}
	out := make([]*Runtime, 0, len(*m))
	for _, r := range *m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}

// Props builds the supervisor.
func Props(d Deps) *actor.Props {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.CallTimeout <= 0 {
		d.CallTimeout = 30 * time.Second
	}
	if d.Backoff.Min == 0 {
		d.Backoff = transport.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	}
	if d.CrashLoop <= 0 {
		d.CrashLoop = 5
	}
	if d.CrashWindow <= 0 {
		d.CrashWindow = time.Minute
	}
	if d.Table == nil {
		d.Table = &Table{}
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{d: d} })
}

// entry is one plugin as the supervisor sees it.
type entry struct {
	folder   string  // "" for a static plugin
	p        *Plugin // nil when the manifest is bad
	static   *Static
	status   string
	err      string
	settings map[string]any
	rt       *Runtime
	pid      *actor.PID // the child actor of a loaded plugin with a handler
	db       *pluginDB
	// waiting: loaded, but its database and handler start once the
	// handler of its previous load is gone (Terminated).
	waiting bool
}

func (e *entry) manifest() *Manifest {
	switch {
	case e.static != nil:
		return &e.static.Manifest
	case e.p != nil:
		return &e.p.Manifest
	}
	return nil
}

// Actor is the plugins supervisor.
type Actor struct {
	d       Deps
	entries map[string]*entry // by domain; bad manifests by "folder:<name>"
	// dying: the handlers being stopped, by their child actor's id, with
	// the database each may still use until its Terminated.
	dying    map[string]*dying
	stopping bool
}

// dying is a stopped plugin whose handler has not exited yet.
type dying struct {
	domain string
	db     *pluginDB
}

// giveUp is sent by a runner that stopped its plugin (crash loop).
type giveUp struct {
	domain, reason string
	rt             *Runtime
}

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.entries = map[string]*entry{}
		a.dying = map[string]*dying{}
		a.scan(c)
	case *actor.Stopping:
		a.stopping = true
		a.d.Table.m.Store(&map[string]*Runtime{})
	case *actor.Terminated:
		a.gone(c, m.Who)
	case *actor.Stopped:
		// The children (and their processes) have stopped by now.
		for _, e := range a.entries {
			if e.db != nil {
				_ = e.db.close()
				e.db = nil
			}
		}
		for id, d := range a.dying {
			if d.db != nil {
				_ = d.db.close()
			}
			delete(a.dying, id)
		}
	case *messages.GetPlugins:
		c.Respond(a.list())
	case *messages.GetPlugin:
		e := a.entries[strings.ToLower(m.Domain)]
		if e == nil {
			c.Respond(&messages.GetPluginReply{Err: fmt.Errorf("%w: %s", messages.ErrUnknownPlugin, m.Domain)})
			return
		}
		c.Respond(&messages.GetPluginReply{Plugin: a.describe(e)})
	case *messages.ControlPlugin:
		msg, err := a.control(c, strings.ToLower(m.Domain), m.Op)
		c.Respond(&messages.ControlPluginReply{Message: msg, Err: err})
	case *SnapshotDatabases:
		c.Respond(a.snapshot(m.Dir))
	case *messages.RescanPlugins:
		a.scan(c)
		c.Respond(a.list())
	case *messages.SetPluginSettings:
		errs, err := a.setSettings(c, strings.ToLower(m.Domain), m.Values)
		c.Respond(&messages.SetPluginSettingsReply{Errors: errs, Err: err})
	case *giveUp:
		if e := a.entries[m.domain]; e != nil && e.rt == m.rt {
			a.unload(c, e)
			e.status, e.err = messages.PluginStopped, m.reason
			a.changed(c)
		}
	}
}

// scan (re)reads DATA/plugins and the static plugins: new plugins load,
// plugins whose folder is gone unload, the rest keep running.
func (a *Actor) scan(c actor.Context) {
	found := map[string]*entry{}
	for i := range a.d.Static {
		s := &a.d.Static[i]
		found[s.Manifest.Domain] = &entry{static: s}
	}
	folders, err := os.ReadDir(a.d.Dir)
	if err != nil && !os.IsNotExist(err) {
		a.d.Log.Error("cannot read the plugins folder", "dir", a.d.Dir, "err", err)
	}
	for _, f := range folders {
		if !f.IsDir() && f.Type()&os.ModeSymlink == 0 {
			continue
		}
		dir := filepath.Join(a.d.Dir, f.Name())
		p, err := LoadFolder(dir)
		if err != nil {
			if isNotExist(err) {
				continue // a folder without plugin.json is not a plugin
			}
			a.d.Log.Error("plugin not loaded", "folder", f.Name(), "err", err, "component", "manifest")
			found["folder:"+f.Name()] = &entry{folder: f.Name(), status: messages.PluginStopped, err: err.Error()}
			continue
		}
		d := p.Manifest.Domain
		if other := found[d]; other != nil {
			msg := fmt.Sprintf("domain %s is already used by %s", d, describeOwner(other))
			a.d.Log.Error("plugin not loaded", "folder", f.Name(), "err", msg, "component", "manifest")
			found["folder:"+f.Name()] = &entry{folder: f.Name(), p: p, status: messages.PluginStopped, err: msg}
			continue
		}
		found[d] = &entry{folder: f.Name(), p: p}
	}
	// Unload what is gone or changed folder; keep what runs unchanged.
	for k, e := range a.entries {
		n := found[k]
		if n == nil || n.folder != e.folder || (n.p == nil) != (e.p == nil) {
			a.unload(c, e)
			delete(a.entries, k)
			continue
		}
		found[k] = e
	}
	a.entries = found
	for k, e := range a.entries {
		if e.status == "" && e.rt == nil {
			if a.stoppedByRequest(k) {
				e.status = messages.PluginStopped
				e.err = "stopped by request"
				continue
			}
			a.load(c, e)
		}
	}
	a.changed(c)
}

func describeOwner(e *entry) string {
	if e.static != nil {
		return "the built-in " + e.static.Manifest.Name + " plugin"
	}
	return "the plugin in folder " + e.folder
}

// load starts a plugin: its settings, database, runtime and handler.
func (a *Actor) load(c actor.Context, e *entry) {
	m := e.manifest()
	if e.static != nil {
		e.settings = a.loadSettings(m)
		e.rt = NewRuntime(m.Domain, "", e.static.Handle)
		e.status, e.err = messages.PluginStatic, ""
		return
	}
	e.settings = a.loadSettings(m)
	rt := &Runtime{Domain: m.Domain, WWW: e.p.WWW, Handles: e.p.Handler != "", Actions: map[string]bool{}, newSettings: make(chan struct{}, 1)}
	for _, act := range m.Actions {
		rt.Actions[act.Name] = true
	}
	// A copy: e.settings is assigned anew at the next load, while the
	// handler of this one may still be exiting and reading its own.
	settings := e.settings
	rt.settings.Store(&settings)
	e.rt = rt
	e.status, e.err = messages.PluginLoaded, ""
	if a.busy(m.Domain) {
		// Its previous handler is still exiting and may still use the
		// database: both start once it is gone.
		e.waiting = true
		return
	}
	a.run(c, e)
}

// busy: a handler of domain is still exiting.
func (a *Actor) busy(domain string) bool {
	for _, d := range a.dying {
		if d.domain == domain {
			return true
		}
	}
	return false
}

// run opens a loaded folder plugin's database and starts its handler;
// a database that does not open stops the plugin with the reason.
func (a *Actor) run(c actor.Context, e *entry) {
	m, rt := e.manifest(), e.rt
	e.waiting = false
	if m.Database {
		db, err := openDB(filepath.Join(a.d.DataDir, m.Domain, "data.db"), a.d.Log.With("domain", m.Domain))
		if err != nil {
			e.rt = nil
			e.status, e.err = messages.PluginStopped, "database: "+err.Error()
			a.d.Log.Error("plugin not loaded", "domain", m.Domain, "err", err, "component", "db")
			return
		}
		e.db = db
	}
	if e.p.Handler == "" {
		return
	}
	lines := a.channelLog(m.Domain)
	run := &runner{
		p: e.p, rt: rt, log: a.d.Log, serve: a.serveFor(e, lines), lines: lines, wsLog: a.pluginLog(m.Domain), backoff: a.d.Backoff, loop: a.d.CrashLoop,
		window: a.d.CrashWindow, timeout: a.d.CallTimeout,
	}
	peerID := a.d.PeerID
	run.init = func() any { return initParams(m.Domain, peerID, *rt.settings.Load()) }
	self, root := c.Self(), c.ActorSystem().Root
	run.onGiveUp = func(reason string) { root.Send(self, &giveUp{domain: m.Domain, reason: reason, rt: rt}) }
	e.pid = c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &handlerActor{run: run} }))
}

// unload stops a plugin's handler and closes its database without
// waiting for the handler to exit (up to the runner's kill grace, 3 s):
// its child actor stops, and until its Terminated arrives (gone) the
// database stays open for the calls the handler still makes, and a new
// load of the domain waits.
func (a *Actor) unload(c actor.Context, e *entry) {
	if e.pid != nil {
		c.Stop(e.pid)
		a.dying[e.pid.Id] = &dying{domain: e.manifest().Domain, db: e.db}
		e.pid, e.db = nil, nil
	}
	if e.db != nil {
		_ = e.db.close()
		e.db = nil
	}
	e.rt = nil
	e.waiting = false
}

// gone is the Terminated of a child: its handler has exited, so its
// database closes and a load of its domain that waited for it runs.
func (a *Actor) gone(c actor.Context, who *actor.PID) {
	d := a.dying[who.Id]
	if d == nil {
		return
	}
	delete(a.dying, who.Id)
	if d.db != nil {
		_ = d.db.close()
	}
	e := a.entries[d.domain]
	if a.stopping || e == nil || !e.waiting || e.rt == nil || a.busy(d.domain) {
		return
	}
	a.run(c, e)
	if e.status == messages.PluginStopped {
		a.changed(c)
	}
}

// changed publishes the table and the internal domains, and hints.
func (a *Actor) changed(c actor.Context) {
	a.publish()
	a.registerDomains(c)
	c.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintPlugins})
}

func (a *Actor) publish() {
	m := map[string]*Runtime{}
	for _, e := range a.entries {
		if e.rt != nil {
			m[e.rt.Domain] = e.rt
		}
	}
	a.d.Table.m.Store(&m)
}

// registerDomains tells the ledger the domains of the plugins that are
// not stopped, and stops those it refuses.
func (a *Actor) registerDomains(c actor.Context) {
	if a.d.Ledger == nil {
		return
	}
	ds := map[string]netip.Addr{}
	for _, e := range a.entries {
		// Static plugins' domains are the node's own (ledger Deps).
		if m := e.manifest(); m != nil && e.static == nil && e.status != messages.PluginStopped {
			ds[m.Domain] = a.d.Address
		}
	}
	f := c.RequestFuture(a.d.Ledger, &messages.SetInternalDomains{Owner: "plugins", Domains: ds}, a.d.CallTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		rep, ok := res.(*messages.SetInternalDomainsReply)
		if err != nil || !ok {
			a.d.Log.Error("cannot register the plugin domains with the ledger", "err", err)
			return
		}
		stopped := false
		for d, reason := range rep.Refused {
			if e := a.entries[d]; e != nil && e.status != messages.PluginStopped {
				a.unload(c, e)
				e.status, e.err = messages.PluginStopped, "domain refused: "+reason
				a.d.Log.Error("plugin stopped", "domain", d, "err", e.err, "component", "manifest")
				stopped = true
			}
		}
		if stopped {
			a.changed(c)
		}
	})
}

func (a *Actor) stoppedByRequest(domain string) bool {
	if a.d.Store == nil {
		return false
	}
	_, err := a.d.Store.Get("plugin:stopped:" + domain)
	return err == nil
}

// control answers start, stop and reload.
func (a *Actor) control(c actor.Context, domain, op string) (string, error) {
	e := a.entries[domain]
	if e == nil {
		return "", fmt.Errorf("%w: %s", messages.ErrUnknownPlugin, domain)
	}
	if e.static != nil {
		return "", fmt.Errorf("%w: %s is built in and always runs", messages.ErrBadPlugin, domain)
	}
	mark := func(stopped bool) {
		if a.d.Store == nil {
			return
		}
		if stopped {
			_ = a.d.Store.Set("plugin:stopped:"+domain, "1")
		} else {
			_ = a.d.Store.Delete("plugin:stopped:" + domain)
		}
	}
	switch op {
	case "start":
		if e.status == messages.PluginLoaded {
			return "plugin " + domain + " is already loaded", nil
		}
		if e.p == nil {
			return "", fmt.Errorf("%w: %s cannot start: %s", messages.ErrBadPlugin, domain, e.err)
		}
		// The folder as it is now, as reload reads it: a manifest (or a
		// handler) that no longer passes its checks must not start from
		// the copy read before it changed.
		p, err := LoadFolder(filepath.Join(a.d.Dir, e.folder))
		if err != nil {
			e.status, e.err = messages.PluginStopped, err.Error()
			a.changed(c)
			return "", fmt.Errorf("%w: %s", messages.ErrBadPlugin, err)
		}
		mark(false)
		if p.Manifest.Domain != domain {
			a.scan(c)
			return "plugin started as " + p.Manifest.Domain, nil
		}
		e.p = p
		a.load(c, e)
	case "stop":
		mark(true)
		a.unload(c, e)
		e.status, e.err = messages.PluginStopped, "stopped by request"
	case "reload":
		a.unload(c, e)
		p, err := LoadFolder(filepath.Join(a.d.Dir, e.folder))
		if err != nil {
			e.status, e.err = messages.PluginStopped, err.Error()
			a.changed(c)
			return "", fmt.Errorf("%w: %s", messages.ErrBadPlugin, err)
		}
		if p.Manifest.Domain != domain {
			// Its domain changed: the list is read again.
			a.scan(c)
			return "plugin reloaded as " + p.Manifest.Domain, nil
		}
		e.p = p
		mark(false)
		a.load(c, e)
	default:
		return "", fmt.Errorf("%w: unknown operation %q", messages.ErrBadPlugin, op)
	}
	a.changed(c)
	if e.status == messages.PluginStopped && op != "stop" {
		return "", fmt.Errorf("plugin %s did not start: %s", domain, e.err)
	}
	return "plugin " + domain + " " + map[string]string{"start": "started", "stop": "stopped", "reload": "reloaded"}[op], nil
}

func (a *Actor) list() *messages.GetPluginsReply {
	out := []messages.Plugin{}
	for _, e := range a.entries {
		out = append(out, a.describe(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return &messages.GetPluginsReply{Plugins: out}
}

func (a *Actor) describe(e *entry) messages.Plugin {
	m := e.manifest()
	if m == nil {
		return messages.Plugin{Name: e.folder, Status: e.status, Error: e.err, Actions: []messages.PluginAction{}, Settings: map[string]messages.PluginSetting{}}
	}
	p := messages.Plugin{
		Domain: m.Domain, Name: m.Name, Version: m.Version, Description: m.Description, Author: m.Author,
		Homepage: m.Homepage, License: m.License, Status: e.status, Error: e.err,
		HasDatabase: m.Database, Actions: m.Actions, Settings: map[string]messages.PluginSetting{},
	}
	if p.Actions == nil {
		// A static plugin's manifest is built in code, not read through
		// Validate: its nil actions are the spec's empty array.
		p.Actions = []messages.PluginAction{}
	}
	if e.static != nil {
		p.HasHandler = true
	} else if e.p != nil {
		p.HasHandler, p.HasWww = e.p.Handler != "", e.p.WWW != ""
	}
	vals := e.settings
	if vals == nil {
		vals = a.loadSettings(m)
	}
	for k, s := range m.Settings {
		p.Settings[k] = messages.PluginSetting{Type: s.Type, Label: s.Label, Description: s.Description, Default: s.Default, Value: vals[k]}
	}
	return p
}

// loadSettings reads the saved values over the defaults.
func (a *Actor) loadSettings(m *Manifest) map[string]any {
	vals := map[string]any{}
	for k, s := range m.Settings {
		vals[k] = s.Default
	}
	if a.d.Store == nil {
		return vals
	}
	raw, err := a.d.Store.Get("plugin:settings:" + m.Domain)
	if err != nil {
		return vals
	}
	var saved map[string]any
	if json.Unmarshal([]byte(raw), &saved) == nil {
		for k, v := range saved {
			if s, ok := m.Settings[k]; ok {
				if cv, err := coerce(s.Type, v); err == nil {
					vals[k] = cv
				}
			}
		}
	}
	return vals
}

// setSettings validates every value, then saves and applies them.
func (a *Actor) setSettings(c actor.Context, domain string, in map[string]json.RawMessage) ([]string, error) {
	e := a.entries[domain]
	if e == nil || e.manifest() == nil {
		return nil, fmt.Errorf("%w: %s", messages.ErrUnknownPlugin, domain)
	}
	m := e.manifest()
	var errs []string
	next := a.loadSettings(m)
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := m.Settings[k]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: not a setting of %s", k, domain))
			continue
		}
		var v any
		if err := json.Unmarshal(in[k], &v); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		cv, err := coerce(s.Type, v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		next[k] = cv
	}
	if len(errs) > 0 {
		return errs, nil
	}
	if a.d.Store != nil {
		b, _ := json.Marshal(next) // JSON values only
		if err := a.d.Store.Set("plugin:settings:"+domain, string(b)); err != nil {
			return nil, fmt.Errorf("save settings: %w", err)
		}
	}
	e.settings = next
	if e.rt != nil {
		e.rt.settings.Store(&next) // the next init carries them too
		e.rt.settingsChanged()
	}
	c.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintPluginSetting, Data: map[string]any{"domain": domain}})
	return nil, nil
}

// serveFor answers the calls a plugin's handler makes; its log calls go
// to lines.
func (a *Actor) serveFor(e *entry, lines lineLog) serveFunc {
	domain := e.manifest().Domain
	db := e.db
	peers := a.d.Peers
	wsLog := a.pluginLog(domain)
	return func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch {
		case strings.HasPrefix(method, "db."):
			if db == nil {
				return nil, errors.New("this plugin has no database (set \"database\": true in plugin.json)")
			}
			return db.call(method, params)
		case method == "log":
			var l struct {
				Level, Component, Message string
			}
			if err := json.Unmarshal(params, &l); err != nil {
				return nil, fmt.Errorf("log: %v", err)
			}
			lvl := slog.LevelInfo
			switch strings.ToLower(l.Level) {
			case "debug":
				lvl = slog.LevelDebug
			case "warn", "warning":
				lvl = slog.LevelWarn
			case "error":
				lvl = slog.LevelError
			}
			// The component is a short name: cut as an argument is,
			// at a character.
			comp := l.Component
			if len(comp) > maxComponent {
				n := maxComponent
				for n > 0 && !utf8.RuneStart(comp[n]) {
					n--
				}
				comp = comp[:n] + "…"
			}
			lines(lvl, clip([]byte(l.Message)), comp)
			wsLog(strings.ToLower(lvl.String()), comp, clip([]byte(l.Message)))
			return map[string]any{}, nil
		case method == "peer.call" || method == "peer.send":
			if peers == nil {
				return nil, errors.New("peer calls are not available on this node")
			}
			var r struct {
				Peer   string          `json:"peer"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(params, &r); err != nil || r.Peer == "" || r.Method == "" {
				return nil, fmt.Errorf("%s: want {peer, method, params}", method)
			}
			return peers.CallPlugin(ctx, r.Peer, domain, r.Method, r.Params, method == "peer.call")
		}
		return nil, fmt.Errorf("unknown method %q", method)
	}
}

// maxComponent bounds the component of a handler's log call.
const maxComponent = 64

// pluginLogRate bounds the plugin-log hints of one plugin per second.
const pluginLogRate = 50

// channelLogRate bounds the lines one plugin's handler puts in the
// plugins channel per second (its log calls and stderr lines together),
// as journald's RateLimitBurst bounds a service's: the lines past it
// are dropped and counted, and the count is logged with the first line
// of a later second, so a handler logging in a loop cannot flood the
// channel, its files and the node's stderr.
const channelLogRate = 200

// lineLog puts one line of a plugin's handler in the plugins channel.
type lineLog func(lvl slog.Level, msg, component string)

// channelLog is the rate-limited lineLog of one plugin.
func (a *Actor) channelLog(domain string) lineLog {
	log := a.d.Log
	var mu sync.Mutex
	var second int64
	var n, dropped int
	return func(lvl slog.Level, msg, component string) {
		now := time.Now().Unix()
		mu.Lock()
		report := 0
		if now != second {
			second, n, report, dropped = now, 0, dropped, 0
		}
		n++
		over := n > channelLogRate
		if over {
			dropped++
		}
		mu.Unlock()
		if report > 0 {
			log.Warn("plugin handler logged more than the channel takes; lines dropped", "domain", domain, "dropped", report, "per_second", channelLogRate, "component", "handler")
		}
		if !over {
			log.Log(context.Background(), lvl, msg, "domain", domain, "component", component)
		}
	}
}

// pluginLog is the function that sends one plugin's log lines as
// plugin-log hints (rate-limited); a no-op without Deps.Events.
func (a *Actor) pluginLog(domain string) func(level, component, message string) {
	events := a.d.Events
	if events == nil {
		return func(string, string, string) {}
	}
	var mu sync.Mutex
	var second int64
	var n int
	return func(level, component, message string) {
		now := time.Now().Unix()
		mu.Lock()
		if now != second {
			second, n = now, 0
		}
		n++
		over := n > pluginLogRate
		mu.Unlock()
		if over {
			return
		}
		events(&messages.Hint{Type: messages.HintPluginLog, Data: map[string]any{"domain": domain, "level": level, "component": component, "message": message}})
	}
}

// handlerActor owns one plugin's runner.
type handlerActor struct {
	run *runner
}

func (h *handlerActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		h.run.start()
	case *actor.Stopping:
		h.run.stop()
	}
}
