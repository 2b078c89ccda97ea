package shop_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMissingHandlerMethodDoesNotCompile builds the example with one handler
// method removed and expects the compiler to refuse the registration. The
// modified handlers.go reaches the compiler through `go build -overlay`, so
// the work tree is never touched.
func TestMissingHandlerMethodDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	// Control: the same build with the file merely reprinted passes, so the
	// failure below comes from the removed method and nothing else.
	if out, err := buildWith(t, func(*ast.File) {}); err != nil {
		t.Fatalf("unmodified example does not build: %v\n%s", err, out)
	}

	out, err := buildWith(t, func(f *ast.File) {
		var kept []ast.Decl
		for _, d := range f.Decls {
			// The method under test, and the `var _ Iface = T{}` assertions, so
			// the failure must come from the registration call in cmd/shopd.
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "HandleOrderCancelled" && receiver(fd) == "Projection" {
				continue
			}
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.VAR && onlyBlank(gd) {
				continue
			}
			kept = append(kept, d)
		}
		if len(kept) != len(f.Decls)-2 {
			t.Fatal("handlers.go changed shape: update this test")
		}
		f.Decls = kept
		dropUnusedImports(f)
	})
	if err == nil {
		t.Fatal("the example built without Projection.HandleOrderCancelled")
	}
	for _, want := range []string{"cmd/shopd/main.go", "RegisterOrdersProjectionV1", "missing method HandleOrderCancelled"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("build output does not mention %q:\n%s", want, out)
		}
	}
}

// buildWith runs `go build ./...` in the example with handlers.go replaced by
// a copy that edit changed.
func buildWith(t *testing.T, edit func(*ast.File)) ([]byte, error) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "handlers.go", nil, 0) // no comments: removed decls leave none behind
	if err != nil {
		t.Fatal(err)
	}
	edit(f)
	var src bytes.Buffer
	if err := format.Node(&src, fset, f); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	modified := filepath.Join(tmp, "handlers.go")
	if err := os.WriteFile(modified, src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	orig, err := filepath.Abs("handlers.go")
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {orig: modified}})
	if err != nil {
		t.Fatal(err)
	}
	overlayPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	return exec.Command("go", "build", "-overlay="+overlayPath, "./...").CombinedOutput()
}

func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) != 1 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// dropUnusedImports removes imports that only the removed method used, so the
// compiler reports the missing method rather than an unused import.
func dropUnusedImports(f *ast.File) {
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		var specs []ast.Spec
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			p, _ := strconv.Unquote(is.Path.Value)
			name := path.Base(p)
			if is.Name != nil {
				name = is.Name.Name
			}
			if used[name] || name == "_" {
				specs = append(specs, s)
			}
		}
		gd.Specs = specs
	}
}

func onlyBlank(gd *ast.GenDecl) bool {
	for _, s := range gd.Specs {
		for _, n := range s.(*ast.ValueSpec).Names {
			if n.Name != "_" {
				return false
			}
		}
	}
	return true
}
