package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/http/httpx"
)

// exportDoc is export's JSON snapshot.
type exportDoc struct {
	Hostname    string `json:"hostname"`
	MachineGUID string `json:"machine_guid"`
	PublicKey   string `json:"public_key"`
	Version     string `json:"version"`
	ExportedAt  int64  `json:"exported_at"`
	// Charts is the allmetrics?format=json object, from the same encoder
	// (appendAllJSON), so an export and a scrape never disagree.
	Charts  json.RawMessage `json:"charts"`
	Alerts  []exportAlert   `json:"alerts"`
	Storage exportStorage   `json:"storage"`
}

type exportAlert struct {
	ID               uint32    `json:"id"`
	Name             string    `json:"name"`
	Chart            string    `json:"chart"`
	Context          string    `json:"context"`
	Status           string    `json:"status"`
	Value            nullFloat `json:"value"`
	Units            string    `json:"units"`
	LastStatusChange int64     `json:"last_status_change"`
}

// exportStorage uses the keys of ai/snapshot's storage summary.
type exportStorage struct {
	Dir                   string `json:"dir"`
	Charts                int    `json:"charts"`
	Dimensions            int    `json:"dimensions"`
	Tier0RetentionSeconds int64  `json:"tier0_retention_seconds"`
	Tier1RetentionSeconds int64  `json:"tier1_retention_seconds"`
	MemoryBytes           int64  `json:"memory_bytes"`
	Tier1DiskBytes        int64  `json:"tier1_disk_bytes"`
	FirstEntry            int64  `json:"first_entry"`
	LastEntry             int64  `json:"last_entry"`
}

func exportAlerts(as []health.Alert) []exportAlert {
	out := make([]exportAlert, 0, len(as))
	for _, a := range as {
		out = append(out, exportAlert{
			ID: a.ID, Name: a.Name, Chart: a.Chart, Context: a.Context, Status: string(a.Status),
			Value: nullFloat(a.Value), Units: a.Units, LastStatusChange: a.LastStatusChange,
		})
	}
	return out
}

// export is a snapshot of every chart's latest values and the alerts, as
// JSON (default) or Prometheus text. write=1 also stores it in the export
// directory, under a name the agent chooses, and answers where; see
// checkExportWrite for who may ask and exportLimits for how much is kept.
func (s *Server) export(ctx *fasthttp.RequestCtx, _ int) error {
	format := argOr(ctx, "format", "json")
	if format != "json" && format != "prometheus" {
		return httpx.BadRequest("unknown export format %q: use json or prometheus", trimArg(format))
	}
	write := yes(ctx, "write", false)
	if write {
		if !ctx.IsGet() { // a HEAD must not leave a file behind
			return httpx.Errorf(fasthttp.StatusMethodNotAllowed, "export?write=1 needs GET")
		}
		if err := s.checkExportWrite(ctx); err != nil {
			return err
		}
		if s.o.ExportDir == "" {
			return httpx.Errorf(fasthttp.StatusServiceUnavailable, "no export directory is configured (AGENT_EXPORT_DIR)")
		}
	}
	var body []byte
	var ext, ct string
	switch format {
	case "json":
		st := s.stats()
		b, err := encodeJSON(&exportDoc{
			Hostname: s.host.Hostname, MachineGUID: s.host.GUID, PublicKey: s.host.PublicKey,
			Version: Version, ExportedAt: s.now().Unix(),
			Charts: s.appendAllJSON(nil, nil),
			Alerts: exportAlerts(s.alerts()),
			Storage: exportStorage{
				Dir: st.Dir, Charts: st.Charts, Dimensions: st.Dimensions,
				Tier0RetentionSeconds: int64(st.Tier0Retention.Seconds()), Tier1RetentionSeconds: int64(st.Tier1Retention.Seconds()),
				MemoryBytes: st.MemoryBytes, Tier1DiskBytes: st.Tier1DiskBytes, FirstEntry: st.FirstTime, LastEntry: st.LastTime,
			},
		})
		if err != nil {
			return &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "encode export", Err: err}
		}
		body, ext, ct = b, "json", ctJSON
	case "prometheus":
		o := promOpts{prefix: "netdata", timestamps: true, types: yes(ctx, "types", true), help: yes(ctx, "help", false)}
		body, ext, ct = s.appendPrometheus(nil, &o), "prom", ctPrometheus
	}
	if !write {
		setBody(ctx, ct, body)
		return nil
	}
	path, removed, err := s.writeExport(body, ext)
	for _, r := range removed {
		s.audit("export", "export pruned (over the kept exports' limits): "+r, map[string]string{"file": r})
	}
	if err != nil {
		return err
	}
	s.audit("export", "export written: "+path, map[string]string{"file": filepath.Base(path), "format": format,
		"bytes": strconv.Itoa(len(body)), "remote": ctx.RemoteAddr().String()})
	return writeJSON(ctx, map[string]any{
		"written": path, "file": filepath.Base(path), "bytes": len(body), "format": format, "time": s.now().Unix(),
		"removed": removed,
	})
}

// checkExportWrite refuses export?write=1 when a web page could have
// caused it (localOnly). The write is a GET (the spec's), so any page
// can start one with an <img>. Old browsers without Fetch Metadata and
// with referrers turned off can still get through; that is why writes
// are also bounded (exportLimits).
func (s *Server) checkExportWrite(ctx *fasthttp.RequestCtx) error {
	return s.localOnly(ctx, "export?write=1", "write exports with curl or a script")
}

// localOnly refuses with 403 a request for what (an action, or a read
// no web page may see: the process table's command lines, the journal,
// the audit trail) when a browser shows it came from a page: a browser
// marks such a request with Sec-Fetch-Site and usually Origin or
// Referer, which curl and scripts never send. "same-site" is refused
// too: a page on another port of this host is another program's. Host
// must name this machine directly: a DNS-rebinding page talks to the
// agent under its own domain, same-origin, so only Host gives it away.
// how says what to use instead.
func (s *Server) localOnly(ctx *fasthttp.RequestCtx, what, how string) error {
	h := &ctx.Request.Header
	host := string(ctx.Host())
	if site := string(h.Peek("Sec-Fetch-Site")); site == "cross-site" || site == "same-site" {
		return httpx.Errorf(fasthttp.StatusForbidden,
			"%s refused: the request came from another site (Sec-Fetch-Site: %s); %s", what, site, how)
	}
	for _, name := range []string{"Origin", "Referer"} {
		if v := string(h.Peek(name)); v != "" && !sameOrigin(v, host) {
			return httpx.Errorf(fasthttp.StatusForbidden,
				"%s refused: %s %q is not this agent (%s); %s", what, name, v, host, how)
		}
	}
	if !s.directHost(host) {
		return httpx.Errorf(fasthttp.StatusForbidden,
			"%s refused: Host %q is not localhost, an IP address or this machine's name (%s); use the agent's address", what, host, s.host.Hostname)
	}
	return nil
}

// sameOrigin reports whether the Origin or Referer u is this agent as
// reached at host (the request's Host). "null" and anything unparsable
// are foreign.
func sameOrigin(u, host string) bool {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") {
		return false
	}
	return strings.EqualFold(p.Host, host)
}

// directHost reports whether host (a Host header, maybe with a port) is a
// name no other site can point at this agent: localhost, an IP literal or
// the machine's own hostname. An empty Host (HTTP/1.0) comes from no
// browser.
func (s *Server) directHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil || strings.EqualFold(host, s.host.Hostname)
}

// exportLimits bound what export?write=1 leaves on disk, so a script in a
// loop, or a page that got past checkExportWrite, cannot fill it.
type exportLimits struct {
	files      int   // newest export files kept; older ones are removed
	fileBytes  int64 // largest export written
	totalBytes int64 // all kept export files together
}

// defaultExportLimits keep a hundred snapshots: a day of hourly exports
// plus room, and at worst 256 MiB (a full snapshot of this agent is well
// under 1 MiB).
var defaultExportLimits = exportLimits{files: 100, fileBytes: 16 << 20, totalBytes: 256 << 20}

const exportPrefix = "peerdns-agent-"

// isExportName reports whether name is a finished export of this agent;
// only those are counted and removed, never other files in the folder.
func isExportName(name string) bool {
	return strings.HasPrefix(name, exportPrefix) && (strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".prom"))
}

// writeExport stores body as a new export file and removes the oldest
// ones beyond the limits. It returns the new file's path and the names
// removed.
func (s *Server) writeExport(body []byte, ext string) (string, []string, error) {
	lim := s.o.exportLimits
	if int64(len(body)) > lim.fileBytes {
		return "", nil, httpx.Errorf(fasthttp.StatusInsufficientStorage,
			"export is %d bytes, more than the %d bytes one export file may hold", len(body), lim.fileBytes)
	}
	s.exportMu.Lock()
	defer s.exportMu.Unlock()
	dir := s.o.ExportDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "create export directory", Err: err}
	}
	removed, err := pruneExports(dir, lim, int64(len(body)))
	if err != nil {
		return "", removed, err
	}
	// The UTC second, then a zero-padded counter: names sort in the
	// order they were written, which is what pruning relies on.
	name := fmt.Sprintf("%s%s-%06d.%s", exportPrefix, s.now().UTC().Format("20060102T150405Z"), s.exportN.Add(1), ext)
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		_ = os.Remove(tmp)
		return "", removed, writeErr(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", removed, writeErr(err)
	}
	return path, removed, nil
}

// pruneExports removes the oldest exports in dir until one more file of
// size bytes fits the limits, plus leftovers of writes that never
// finished. Called with exportMu held.
func pruneExports(dir string, lim exportLimits, size int64) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name: oldest export first
	if err != nil {
		return nil, &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "read export directory", Err: err}
	}
	type file struct {
		name string
		size int64
	}
	var files []file
	var total int64
	removed := []string{}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, exportPrefix) {
			continue
		}
		if strings.HasSuffix(name, ".tmp") { // a write cut short by a crash
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		if !isExportName(name) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files = append(files, file{name, info.Size()})
		total += info.Size()
	}
	for len(files) > 0 && (len(files)+1 > lim.files || total+size > lim.totalBytes) {
		f := files[0]
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "remove old export " + f.name, Err: err}
		}
		removed = append(removed, f.name)
		files, total = files[1:], total-f.size
	}
	return removed, nil
}

// writeErr maps a failed write: a full disk or quota is 507, anything
// else 500.
func writeErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &httpx.Error{Status: fasthttp.StatusInsufficientStorage, Msg: "no space left for the export file", Err: err}
	}
	return &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "write export file", Err: err}
}
