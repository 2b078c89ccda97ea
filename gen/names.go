package gen

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
)

// Names a generated file declares for the inbox side, whatever the
// declarations.
var fixedNames = []string{"Delivery", "ConsumerNames"}

// Package names the generated file imports, for the inbox side and for the
// outbox side; a package-level declaration with one of these names would
// collide with the import.
var (
	importNames       = []string{"context", "fmt", "pgx", "handler", "inbox"}
	outboxImportNames = []string{"context", "outbox"}
)

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
	var imports []string
	if len(m.Events) > 0 {
		for _, n := range fixedNames {
			claim(n, origin{what: "generated for every package"})
		}
		imports = append(imports, importNames...)
		if m.Queries != nil && !m.Queries.Local {
			imports = append(imports, m.Queries.Name)
		}
	}
	if len(m.Emits) > 0 {
		for _, n := range outboxImportNames {
			if !slices.Contains(imports, n) {
				imports = append(imports, n)
			}
		}
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
	for _, em := range m.Emits {
		o := origin{pos: em.pos, what: fmt.Sprintf("outbox event %s v%d", em.Type, em.Version)}
		for _, n := range []string{em.Name + "Event", "Emit" + em.Name} {
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
