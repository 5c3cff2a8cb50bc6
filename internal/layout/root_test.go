package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rootPkg is the composition root (docs/architecture.md: it spawns,
// wires, serves and stops; no routes, no samplers, no business logic).
const rootPkg = "cmd/peerdns/node"

// TestCompositionRootOnlyWires checks what a parser can see of that
// rule in the root's non-test files: it registers no route itself (a
// router method called with a path: the routes are http/'s), runs no
// ticker or timer of its own (samplers are actors), and stays a few
// hundred lines per file.
func TestCompositionRootOnlyWires(t *testing.T) {
	dir := filepath.Join(root(t), filepath.FromSlash(rootPkg))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{"GET": true, "POST": true, "PUT": true, "DELETE": true, "PATCH": true, "HEAD": true, "OPTIONS": true, "ANY": true, "Handle": true}
	fset := token.NewFileSet()
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		files++
		p := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", p, err)
		}
		if lines := fset.File(f.Pos()).LineCount(); lines > 600 {
			t.Errorf("%s/%s has %d lines: the root only wires; move the logic to the part that owns it", rootPkg, name, lines)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if methods[sel.Sel.Name] && len(call.Args) > 0 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if path, _ := strconv.Unquote(lit.Value); strings.HasPrefix(path, "/") {
						t.Errorf("%s: %s registers route %s %s: routes belong in http/", rootPkg, fset.Position(call.Pos()), sel.Sel.Name, path)
					}
				}
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" {
				switch sel.Sel.Name {
				case "NewTicker", "Tick", "AfterFunc", "NewTimer":
					t.Errorf("%s: %s runs time.%s: samplers and timers belong to an actor", rootPkg, fset.Position(call.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	if files == 0 {
		t.Fatalf("no Go files in %s: the composition root moved; update rootPkg", rootPkg)
	}
}
