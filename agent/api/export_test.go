package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// TestExportSnapshot: the JSON snapshot carries the identity, the same
// charts as allmetrics?format=json, the alerts (a value that is not a
// number is null) and the storage summary.
func TestExportSnapshot(t *testing.T) {
	env := newTestEnv(t)
	snap := decode(t, "export", env.get(t, "/api/v3/export").body).(map[string]any)
	for _, k := range []string{"hostname", "machine_guid", "public_key", "version", "exported_at", "charts", "alerts", "storage"} {
		if _, ok := snap[k]; !ok {
			t.Errorf("export lacks %q; has %v", k, keys(snap))
		}
	}
	if snap["exported_at"] != float64(env.now.Unix()) {
		t.Errorf("exported_at = %v, want %d", snap["exported_at"], env.now.Unix())
	}
	all := decode(t, "allmetrics", env.get(t, "/api/v1/allmetrics?format=json").body)
	if !reflect.DeepEqual(snap["charts"], all) {
		t.Errorf("export charts differ from allmetrics?format=json")
	}
	byName := map[string]map[string]any{}
	for _, a := range snap["alerts"].([]any) {
		m := a.(map[string]any)
		byName[m["name"].(string)] = m
	}
	if a := byName["10min_cpu_usage"]; a == nil || a["value"] != 80.5 || a["status"] != "WARNING" {
		t.Errorf("10min_cpu_usage = %v", a)
	}
	if a := byName["load_average_15"]; a == nil || a["value"] != nil {
		t.Errorf("load_average_15 (NaN value) = %v, want value null", a)
	}
	st := snap["storage"].(map[string]any)
	if st["charts"] != float64(len(testCharts())) || st["last_entry"] != float64(env.now.Unix()-1) {
		t.Errorf("storage = %v", st)
	}
}

// exportFiles lists the export directory.
func exportFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

var exportName = regexp.MustCompile(`^peerdns-agent-[0-9]{8}T[0-9]{6}Z-[0-9]{6}\.(json|prom)$`)

// writeExport asks for export?write=1 with hdr and returns the decoded
// answer, which must be 200.
func (e *testEnv) writeExport(t *testing.T, query string, hdr map[string]string) map[string]any {
	t.Helper()
	r := e.do(t, "GET", "/api/v3/export?write=1&"+query, hdr)
	if r.status != 200 {
		t.Fatalf("export?write=1&%s (%v) = %d %s", query, hdr, r.status, r.body)
	}
	return decode(t, "write", r.body).(map[string]any)
}

// TestExportWrite: curl's GET (no Origin) writes a file that the agent
// names, in the export directory, whatever the query says.
func TestExportWrite(t *testing.T) {
	env := newTestEnv(t)
	elsewhere := t.TempDir()
	for _, q := range []string{
		"",
		"format=prometheus",
		"file=../../etc/passwd&name=x&path=" + filepath.Join(elsewhere, "x") + "&dir=" + elsewhere,
	} {
		res := env.writeExport(t, q, nil)
		path := res["written"].(string)
		if filepath.Dir(path) != env.export || !exportName.MatchString(filepath.Base(path)) || res["file"] != filepath.Base(path) {
			t.Fatalf("%q: written to %q, want a file the agent names in %q", q, path, env.export)
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) != int(res["bytes"].(float64)) {
			t.Fatalf("file %s: %v (%d bytes, said %v)", path, err, len(b), res["bytes"])
		}
		if strings.Contains(q, "prometheus") {
			var p expfmt.TextParser
			if _, err := p.TextToMetricFamilies(bytes.NewReader(b)); err != nil {
				t.Fatalf("exported prometheus file does not parse: %v", err)
			}
		} else if !json.Valid(b) {
			t.Fatalf("exported JSON invalid")
		}
	}
	if n := len(exportFiles(t, env.export)); n != 3 {
		t.Errorf("%d files in the export dir, want 3: %v", n, exportFiles(t, env.export))
	}
	if f := exportFiles(t, elsewhere); len(f) != 0 {
		t.Errorf("a request-named path was written: %v", f)
	}
	if r := env.do(t, "HEAD", "/api/v3/export?write=1", nil); r.status != 405 {
		t.Errorf("HEAD export?write=1 = %d, want 405", r.status)
	}
	if n := len(exportFiles(t, env.export)); n != 3 {
		t.Errorf("HEAD wrote a file: %v", exportFiles(t, env.export))
	}
}

// TestExportWriteFromBrowsers: a write a web page could have started
// (another site's <img> or fetch, a DNS-rebinding page) is refused with
// 403 and writes nothing; the agent's own origin and direct clients pass.
func TestExportWriteFromBrowsers(t *testing.T) {
	env := newTestEnv(t)
	self := strings.TrimPrefix(env.url, "http://")
	refused := []struct {
		name string
		hdr  map[string]string
		msg  string
	}{
		{"img from another site", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}, "Sec-Fetch-Site: cross-site"},
		{"same site, other origin", map[string]string{"Sec-Fetch-Site": "same-site"}, "Sec-Fetch-Site: same-site"},
		{"foreign Origin", map[string]string{"Origin": "https://evil.example"}, `Origin "https://evil.example"`},
		{"opaque Origin", map[string]string{"Origin": "null"}, `Origin "null"`},
		{"foreign Referer (old browser)", map[string]string{"Referer": "https://evil.example/page.html"}, "Referer"},
		{"other port on this host", map[string]string{"Origin": "http://127.0.0.1:1"}, "Origin"},
		{"DNS rebinding", map[string]string{"Host": "evil.example:18888", "Origin": "http://evil.example:18888", "Sec-Fetch-Site": "same-origin"}, `Host "evil.example:18888"`},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			r := env.do(t, "GET", "/api/v3/export?write=1", c.hdr)
			if r.status != 403 || !strings.Contains(string(r.body), c.msg) || !strings.Contains(string(r.body), "export?write=1 refused") {
				t.Errorf("= %d %q, want 403 naming %q", r.status, r.body, c.msg)
			}
			if f := exportFiles(t, env.export); len(f) != 0 {
				t.Errorf("refused write left files %v", f)
			}
			// Reading the snapshot is not a side effect: still answered.
			if r := env.do(t, "GET", "/api/v3/export", c.hdr); r.status != 200 {
				t.Errorf("export without write = %d %s", r.status, r.body)
			}
		})
	}
	allowed := []struct {
		name string
		hdr  map[string]string
	}{
		{"curl", nil},
		{"typed in the address bar", map[string]string{"Sec-Fetch-Site": "none"}},
		{"the agent's own origin", map[string]string{"Origin": "http://" + self, "Sec-Fetch-Site": "same-origin", "Referer": "http://" + self + "/"}},
		{"localhost", map[string]string{"Host": "localhost:18888"}},
	}
	for _, c := range allowed {
		t.Run(c.name, func(t *testing.T) {
			env.writeExport(t, "", c.hdr)
		})
	}
}

// TestExportWriteBounds: the export dir keeps the newest files within the
// count and byte limits, removes only the agent's own exports, and a
// snapshot over the per-file limit is refused with 507.
func TestExportWriteBounds(t *testing.T) {
	lim := exportLimits{files: 3, fileBytes: 16 << 20, totalBytes: 16 << 20}
	env := newTestEnv(t, func(o *Options) { o.exportLimits = lim })
	if err := os.MkdirAll(env.export, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"notes.txt", "peerdns-agent-keep.txt"} {
		if err := os.WriteFile(filepath.Join(env.export, other), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var written []string
	for i := 0; i < 5; i++ {
		res := env.writeExport(t, "", nil)
		written = append(written, res["file"].(string))
		wantRemoved := 0
		if i >= lim.files {
			wantRemoved = 1
		}
		if rm := res["removed"].([]any); len(rm) != wantRemoved || (wantRemoved == 1 && rm[0] != written[i-lim.files]) {
			t.Errorf("write %d removed %v, want the oldest (%d)", i, rm, wantRemoved)
		}
	}
	want := append([]string{"notes.txt", "peerdns-agent-keep.txt"}, written[2:]...)
	if got := exportFiles(t, env.export); !equalStrings(sortStrings(got), sortStrings(want)) {
		t.Errorf("export dir = %v, want %v", got, want)
	}

	// A byte budget of two and a half snapshots keeps two.
	size := fileSize(t, filepath.Join(env.export, written[4]))
	env2 := newTestEnv(t, func(o *Options) {
		o.exportLimits = exportLimits{files: 100, fileBytes: 16 << 20, totalBytes: size*5/2 + 1024}
	})
	for i := 0; i < 4; i++ {
		env2.writeExport(t, "", nil)
	}
	if got := exportFiles(t, env2.export); len(got) != 2 {
		t.Errorf("byte budget kept %v, want 2 files", got)
	}

	// One snapshot larger than a file may be: 507, nothing written.
	env3 := newTestEnv(t, func(o *Options) {
		o.exportLimits = exportLimits{files: 100, fileBytes: 100, totalBytes: 16 << 20}
	})
	r := env3.get(t, "/api/v3/export?write=1")
	if r.status != 507 || !strings.Contains(string(r.body), "more than the 100 bytes") {
		t.Errorf("oversized export = %d %q, want 507", r.status, r.body)
	}
	if f := exportFiles(t, env3.export); len(f) != 0 {
		t.Errorf("oversized export left %v", f)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func sortStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// The process table and the journal and audit logs are refused to a
// request that shows a web page, as export?write=1 is (CORS "*" would
// let any page read them); curl, scripts and the agent's own origin read
// them, and the anomaly log stays as open as the metrics.
func TestPrivateReadsFromBrowsers(t *testing.T) {
	env := newTestEnv(t)
	self := strings.TrimPrefix(env.url, "http://")
	paths := []string{"/api/v3/processes", "/api/v3/logs?source=audit", "/api/v1/logs?source=audit"}
	for _, hdr := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"},
		{"Origin": "http://127.77.0.5:8080"},
		{"Host": "evil.example:18888", "Origin": "http://evil.example:18888", "Sec-Fetch-Site": "same-origin"},
	} {
		for _, p := range paths {
			if r := env.do(t, "GET", p, hdr); r.status != 403 || !strings.Contains(string(r.body), "refused") {
				t.Errorf("%s with %v = %d %q, want 403", p, hdr, r.status, r.body)
			}
		}
	}
	for _, hdr := range []map[string]string{nil, {"Sec-Fetch-Site": "none"}, {"Origin": "http://" + self, "Sec-Fetch-Site": "same-origin"}} {
		for _, p := range paths {
			if r := env.do(t, "GET", p, hdr); r.status != 200 {
				t.Errorf("%s with %v = %d %q, want 200", p, hdr, r.status, r.body)
			}
		}
	}
	if r := env.do(t, "GET", "/api/v3/logs?source=anomaly", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); r.status == 403 {
		t.Errorf("the anomaly log from another site = %d %q, want it open", r.status, r.body)
	}
}
