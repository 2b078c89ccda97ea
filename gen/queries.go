package gen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
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
// replaces and vendoring behave as in a build) and checks that it is sqlc
// output that generated code can call: `func New(db DBTX) *Queries`, with a
// DBTX that the message's pgx.Tx satisfies.
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
	dbtx := sqlcNew(files)
	if dbtx == "" {
		return nil, fmt.Errorf("-queries %s: package %s has no `func New(db DBTX) *Queries` (point -queries at sqlc's output package)", path, name)
	}
	if problem := dbtxProblem(files, dbtx); problem != "" {
		return nil, fmt.Errorf("-queries %s: package %s %s; handlers get the message's pgx.Tx, so set `sql_package: pgx/v5` in sqlc.yaml and run sqlc generate again", path, name, problem)
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

// sqlcNew looks for a type Queries and a plain func New taking one argument of
// a named type and returning *Queries. It returns the argument's type name, or
// "" when there is no such pair.
func sqlcNew(files []*ast.File) string {
	var typ bool
	var param string
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
				id, ok := p[0].Type.(*ast.Ident)
				if !ok {
					continue
				}
				if star, ok := r.List[0].Type.(*ast.StarExpr); ok {
					if res, ok := star.X.(*ast.Ident); ok && res.Name == "Queries" {
						param = id.Name
					}
				}
			}
		}
	}
	if !typ {
		return ""
	}
	return param
}

// pgxMethods are the methods sqlc's pgx/v5 DBTX declares; pgx.Tx has them all.
var pgxMethods = []string{"Exec", "Query", "QueryRow"}

// dbtxProblem says why the type New takes is not sqlc's pgx/v5 DBTX, or
// returns "". sqlc writes other interfaces for other sql_package settings:
// database/sql's has ExecContext and QueryContext, pgx/v4's has pgx/v4 types.
// Generated code would then not compile, far from the cause.
func dbtxProblem(files []*ast.File, dbtx string) string {
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if ts.Name.Name != dbtx {
					continue
				}
				it, ok := ts.Type.(*ast.InterfaceType)
				if !ok {
					return fmt.Sprintf("declares New(%s), but %s is not sqlc's DBTX interface", dbtx, dbtx)
				}
				return interfaceProblem(f, it, dbtx)
			}
		}
	}
	return "" // declared elsewhere (a predeclared any?): leave it to the compiler
}

func interfaceProblem(f *ast.File, it *ast.InterfaceType, dbtx string) string {
	methods := map[string]bool{}
	for _, m := range it.Methods.List {
		for _, n := range m.Names {
			methods[n.Name] = true
		}
	}
	if methods["ExecContext"] || methods["QueryContext"] {
		return fmt.Sprintf("was generated for database/sql (its %s has ExecContext and QueryContext, not pgx's Exec and Query)", dbtx)
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/jackc/pgx/v4" || strings.HasPrefix(p, "github.com/jackc/pgx/v4/") {
			return fmt.Sprintf("was generated for pgx/v4 (the file declaring %s imports %s)", dbtx, p)
		}
	}
	var missing []string
	for _, m := range pgxMethods {
		if !methods[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("is not sqlc's pgx/v5 output (its %s lacks %s)", dbtx, strings.Join(missing, ", "))
	}
	return ""
}
