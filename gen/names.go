package gen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
)

// queriesPkg is the application's sqlc package.
type queriesPkg struct {
	Path  string
	Name  string
	Local bool // the events live in the sqlc package itself
}

// Qual is how generated code names the package's identifiers.
func (q *queriesPkg) Qual() string {
	if q.Local {
		return ""
	}
	return q.Name + "."
}

// resolveQueries finds the package's directory with `go list` (so module
// replaces and vendoring behave as in a build) and checks that it has sqlc's
// constructor, `func New(db DBTX) *Queries`.
func resolveQueries(dir, path string) (*queriesPkg, error) {
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}\n{{.Name}}", path)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("-queries %s: %s", path, msg)
	}
	lines := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)
	if len(lines) != 2 {
		return nil, fmt.Errorf("-queries %s: unexpected go list output %q", path, out)
	}
	qdir, name := lines[0], lines[1]
	files, err := parseDir(token.NewFileSet(), qdir, "")
	if err != nil {
		return nil, fmt.Errorf("-queries %s: %w", path, err)
	}
	if !hasNew(files) {
		return nil, fmt.Errorf("-queries %s: package %s has no `func New(db DBTX) *Queries` (point -queries at sqlc's output package)", path, name)
	}
	q := &queriesPkg{Path: path, Name: name}
	if a, b := absDir(dir), absDir(qdir); a != "" && a == b {
		q.Local = true
	}
	return q, nil
}

func absDir(dir string) string {
	a, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	return filepath.Clean(a)
}

// hasNew looks for a type Queries and a plain func New taking one argument of
// a named type and returning *Queries.
func hasNew(files []*ast.File) bool {
	var typ, fn bool
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Queries" {
						typ = true
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil || d.Name.Name != "New" || d.Type.TypeParams != nil {
					continue
				}
				p, r := d.Type.Params.List, d.Type.Results
				if len(p) != 1 || len(p[0].Names) > 1 || r == nil || len(r.List) != 1 || len(r.List[0].Names) > 1 {
					continue
				}
				if _, ok := p[0].Type.(*ast.Ident); !ok {
					continue
				}
				if star, ok := r.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Queries" {
						fn = true
					}
				}
			}
		}
	}
	return typ && fn
}

// Names every generated file declares, whatever the declarations.
var fixedNames = []string{"Delivery", "ConsumerNames", "inboxgenMessage", "inboxgenRegister", "inboxgenEntry"}

// Package names the generated file imports; a package-level declaration with
// one of these names would collide with the import.
var importNames = []string{"context", "fmt", "pgx", "handler", "inbox"}

// checkNames reports generated names that collide with the package's own
// declarations or with each other, at the declaration that causes it.
func checkNames(fset *token.FileSet, files []*ast.File, m *model, errs *Errors) {
	type origin struct {
		pos  token.Position
		what string
	}
	generated := map[string]origin{}
	claim := func(name string, o origin) {
		if prev, dup := generated[name]; dup {
			errs.add(o.pos, "generated name %s (%s) collides with %s (declared at %s): rename one", name, o.what, prev.what, prev.pos)
			return
		}
		generated[name] = o
	}
	for _, n := range fixedNames {
		claim(n, origin{what: "generated for every package"})
	}
	imports := append([]string(nil), importNames...)
	if m.Queries != nil && !m.Queries.Local {
		imports = append(imports, m.Queries.Name)
	}
	for _, n := range imports {
		claim(n, origin{what: "an import of the generated file"})
	}
	for _, c := range m.Consumers {
		o := origin{pos: c.pos, what: fmt.Sprintf("consumer %q", c.Name)}
		for _, n := range []string{c.Ident, c.Ident + "Consumer", c.Ident + "Handler", "Register" + c.Ident} {
			claim(n, o)
		}
	}
	for _, ev := range m.Events {
		o := origin{pos: ev.pos, what: fmt.Sprintf("event %s v%d", ev.Type, ev.Version)}
		for _, n := range []string{ev.Name + "Consumer", ev.Name + "Message", "Accept" + ev.Name, "Accept" + ev.Name + "Tx"} {
			claim(n, o)
		}
	}

	for _, f := range files {
		for _, d := range f.Decls {
			for _, id := range declaredNames(d) {
				if o, clash := generated[id.Name]; clash {
					where := ""
					if o.pos.IsValid() {
						where = " at " + o.pos.String()
					}
					errs.add(fset.Position(id.Pos()), "%s is also a name inboxgen generates (%s%s): rename it", id.Name, o.what, where)
				}
			}
		}
	}
}

// declaredNames returns the package-level names a declaration introduces.
func declaredNames(d ast.Decl) []*ast.Ident {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			return []*ast.Ident{d.Name}
		}
	case *ast.GenDecl:
		var out []*ast.Ident
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				out = append(out, s.Name)
			case *ast.ValueSpec:
				out = append(out, s.Names...)
			}
		}
		return out
	}
	return nil
}
