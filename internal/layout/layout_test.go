package layout

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "peerdns"

// mayImport is the layout table of docs/architecture.md as data: a package
// under the key may import project packages under the listed folders (and
// its own folder's packages). Folders absent from the map (cmd, bench,
// examples) may import anything.
var mayImport = map[string][]string{
	"http":       {"messages", "internal", "dns", "http"},
	"actors":     {"messages", "transport", "supervisor", "internal", "actors"},
	"agent":      {"messages", "transport", "internal", "http/httpx", "agent"},
	"dns":        {"messages", "internal", "dns"},
	"transport":  {"messages", "internal", "transport"},
	"supervisor": {"messages", "supervisor"},
	"messages":   {"messages"},
	"internal":   {"internal", "messages"},
}

// debt lists arrows, as "from -> to", that may break the table for a
// while (a restructuring in steps); none today. The test fails both when
// a new arrow breaks a rule and when one listed here is gone (then
// delete its line), so the list only ever shrinks.
var debt = map[string]bool{}

// root is the module's folder, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("module root not found from the test's folder: %v", err)
	}
	return r
}

// packages maps each folder (relative to the module root, slash-separated)
// that holds non-test Go files to the project packages those files import.
func packages(t *testing.T, r string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != r && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parse %s: %w", p, err)
		}
		if f.Name.Name == "tools" {
			return nil // the dependency pin, not a package of the tree
		}
		rel, _ := filepath.Rel(r, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		if out[rel] == nil {
			out[rel] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module+"/") {
				out[rel][strings.TrimPrefix(path, module+"/")] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func under(pkg, folder string) bool {
	return pkg == folder || strings.HasPrefix(pkg, folder+"/")
}

func TestImportRules(t *testing.T) {
	pkgs := packages(t, root(t))
	seen := map[string]bool{}
	var broken []string
	for from, imps := range pkgs {
		top := strings.Split(from, "/")[0]
		allowed, ruled := mayImport[top]
		if !ruled {
			continue
		}
		for to := range imps {
			ok := false
			for _, a := range allowed {
				if under(to, a) {
					ok = true
					break
				}
			}
			if ok {
				continue
			}
			arrow := from + " -> " + to
			if debt[arrow] {
				seen[arrow] = true
				continue
			}
			broken = append(broken, arrow)
		}
	}
	sort.Strings(broken)
	for _, b := range broken {
		t.Errorf("import breaks the layout rules of docs/architecture.md: %s", b)
	}
	var gone []string
	for arrow := range debt {
		if !seen[arrow] {
			gone = append(gone, arrow)
		}
	}
	sort.Strings(gone)
	for _, g := range gone {
		t.Errorf("%s no longer exists: delete its line from debt", g)
	}
}

// mentions reports whether doc names the package at rel (relative to its
// top-level folder top) in backquotes, with or without the folder and a
// trailing slash.
func mentions(doc, top, rel string) bool {
	for _, form := range []string{rel, rel + "/", top + "/" + rel, top + "/" + rel + "/"} {
		if strings.Contains(doc, "`"+form+"`") {
			return true
		}
	}
	return false
}

func TestREADMEsListEveryPackage(t *testing.T) {
	r := root(t)
	pkgs := packages(t, r)
	var rows []string
	for pkg := range pkgs {
		rows = append(rows, pkg)
	}
	sort.Strings(rows)
	for _, pkg := range rows {
		parts := strings.SplitN(pkg, "/", 2)
		if len(parts) < 2 || parts[0] == "bench" || parts[0] == "examples" {
			// A top-level folder's own package is what its README is
			// about; benchmarks and examples are listed by their READMEs'
			// commands, not as packages.
			continue
		}
		top, rel := parts[0], parts[1]
		readme := filepath.Join(r, top, "README.md")
		b, err := os.ReadFile(readme)
		if err != nil {
			t.Errorf("%s: package %s has no README in its top-level folder", top, pkg)
			continue
		}
		if !mentions(string(b), top, rel) {
			t.Errorf("%s/README.md does not list package %s (write it as `%s`)", top, pkg, rel)
		}
	}
}

func TestArchitectureListsEveryFolder(t *testing.T) {
	r := root(t)
	b, err := os.ReadFile(filepath.Join(r, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	entries, err := os.ReadDir(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if !strings.Contains(doc, "`"+e.Name()+"/`") && !strings.Contains(doc, "`"+e.Name()+"`") {
			t.Errorf("docs/architecture.md does not name the top-level folder %s/", e.Name())
		}
		if _, err := os.Stat(filepath.Join(r, e.Name(), "README.md")); err != nil && e.Name() != "docs" {
			t.Errorf("top-level folder %s/ has no README.md", e.Name())
		}
	}
	for top := range mayImport {
		if !strings.Contains(doc, "`"+top+"/`") {
			t.Errorf("docs/architecture.md has no layout row for %s/", top)
		}
	}
}

// TestNoPointersOutside keeps the repo self-contained: no document,
// comment or test file (its provenance notes included) sends a reader to
// files the repo does not carry.
func TestNoPointersOutside(t *testing.T) {
	r := root(t)
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != r && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".md", ".go", ".json", ".txt", ".html", ".js", ".sh", ".yml", ".yaml", ".toml":
		default:
			return nil
		}
		if strings.HasSuffix(p, "layout_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if s := string(b); strings.Contains(s, "../shared/") || strings.Contains(s, "/work/shared/") {
			rel, _ := filepath.Rel(r, p)
			t.Errorf("%s points outside the repo (../shared/)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
