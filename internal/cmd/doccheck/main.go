// Command doccheck fails when an exported identifier of the repository's Go
// code has no doc comment: every package needs a package comment, and every
// exported function, method (of an exported type), type, constant, variable,
// struct field and interface method needs a comment saying what it is. It reads
// every module's non-test Go files with go/parser; generated files (a "Code
// generated ... DO NOT EDIT." line, such as sqlc's output in db/) are exempt,
// since their generator writes them and the next run would drop a hand-written
// comment. So are methods that implement a standard interface by name (Error,
// String, Unwrap, Is, As, MarshalJSON, Scan, Value, Write, ...): the interface
// says what they do. A constant, variable or type in a parenthesized group is
// documented by the group's comment; a field or constant by a trailing line
// comment; a struct field or interface method also by the doc comment above
// the run of fields it opens (up to a blank line), when that comment names it.
//
//	go run ./internal/cmd/doccheck [dir]
//
// Each finding is printed as file:line: identifier, relative to dir (default:
// the current directory).
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

func main() {
	root := "."
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: doccheck [dir]")
		os.Exit(2)
	}
	if len(os.Args) == 2 {
		root = os.Args[1]
	}
	n, err := check(root, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(1)
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d exported identifiers without a doc comment (above)\n", n)
		os.Exit(1)
	}
}

// A finding is one undocumented identifier.
type finding struct {
	pos  token.Position
	what string
}

// check reports every undocumented identifier below root and returns their
// number.
func check(root string, w io.Writer) (int, error) {
	dirs, err := goDirs(root)
	if err != nil {
		return 0, err
	}
	var all []finding
	for _, dir := range dirs {
		fs, err := checkDir(dir)
		if err != nil {
			return 0, err
		}
		all = append(all, fs...)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].pos, all[j].pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	for _, f := range all {
		name := f.pos.Filename
		if rel, err := filepath.Rel(root, name); err == nil {
			name = rel
		}
		fmt.Fprintf(w, "%s:%d: %s\n", name, f.pos.Line, f.what)
	}
	return len(all), nil
}

// goDirs lists the directories below root holding Go files, nested modules
// included, leaving out what the go command leaves out of a build: testdata,
// and directories whose names start with "." or "_" (and node_modules).
func goDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.go"))
		if err != nil {
			return err
		}
		if len(matches) > 0 {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs, err
}

// checkDir checks the non-test, non-generated files of one directory, by
// package (a directory may hold package main beside a documentation-only
// file, or an ignored program).
func checkDir(dir string) ([]finding, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type pkg struct {
		files      []*ast.File
		documented bool
		first      token.Pos
	}
	pkgs := map[string]*pkg{}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if ast.IsGenerated(f) || ignored(f) {
			continue
		}
		p := pkgs[f.Name.Name]
		if p == nil {
			p = &pkg{first: f.Package}
			pkgs[f.Name.Name] = p
			names = append(names, f.Name.Name)
		}
		p.files = append(p.files, f)
		p.documented = p.documented || f.Doc != nil
	}
	var out []finding
	for _, name := range names {
		p := pkgs[name]
		if !p.documented {
			out = append(out, finding{fset.Position(p.first), "package " + name + " (no file has a package comment)"})
		}
		for _, f := range p.files {
			out = append(out, checkFile(fset, f)...)
		}
	}
	return out, nil
}

// ignored reports a file built by no configuration ("//go:build ignore"): a
// program run by go generate or go run, not part of the package.
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if c.Text == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}

func checkFile(fset *token.FileSet, f *ast.File) []finding {
	var out []finding
	report := func(pos token.Pos, what string) {
		out = append(out, finding{fset.Position(pos), what})
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				recv := receiverType(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue // not reachable by name (an interface's method says what it does)
				}
				if standardMethods[name] {
					continue
				}
				name = recv + "." + name
			}
			if d.Doc == nil {
				report(d.Name.Pos(), "func "+name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && d.Doc == nil && s.Comment == nil {
						report(s.Name.Pos(), "type "+s.Name.Name)
					}
					out = append(out, checkMembers(fset, s)...)
				case *ast.ValueSpec:
					documented := s.Doc != nil || s.Comment != nil || d.Doc != nil
					for _, n := range s.Names {
						if n.IsExported() && !documented {
							report(n.Pos(), d.Tok.String()+" "+n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// checkMembers reports the exported fields of an exported struct type and the
// methods of an exported interface that have neither a doc comment nor a line
// comment. Embedded fields are named by their type's own documentation.
func checkMembers(fset *token.FileSet, s *ast.TypeSpec) []finding {
	var out []finding
	var list *ast.FieldList
	kind := "field"
	switch t := s.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list, kind = t.Methods, "method"
	default:
		return nil
	}
	// A doc comment covers the fields that follow it up to a blank line and
	// that it names: "// Username and Password authenticate ..." above
	// Username documents Password too.
	var paragraph string
	lastLine := -1
	for _, fld := range list.List {
		start, end := fset.Position(fld.Pos()).Line, fset.Position(fld.End()).Line
		if fld.Doc != nil {
			paragraph = fld.Doc.Text()
		} else if start != lastLine+1 {
			paragraph = ""
		}
		lastLine = end
		if len(fld.Names) == 0 || fld.Doc != nil || fld.Comment != nil {
			continue
		}
		for _, n := range fld.Names {
			if n.IsExported() && !names(paragraph, n.Name) {
				out = append(out, finding{fset.Position(n.Pos()), kind + " " + s.Name.Name + "." + n.Name})
			}
		}
	}
	return out
}

// names reports whether text mentions name as a word.
func names(text, name string) bool {
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	}) {
		if w == name {
			return true
		}
	}
	return false
}

// standardMethods are the methods of the standard library's small interfaces
// (error, fmt.Stringer and fmt.Formatter, errors.Is/As/Unwrap, the encoding
// and database/sql marshalers, io, http.Handler, sort.Interface).
var standardMethods = map[string]bool{
	"Error": true, "String": true, "GoString": true, "Format": true,
	"Unwrap": true, "Is": true, "As": true,
	"MarshalJSON": true, "UnmarshalJSON": true, "MarshalText": true, "UnmarshalText": true,
	"MarshalBinary": true, "UnmarshalBinary": true, "Scan": true, "Value": true,
	"Read": true, "Write": true, "Close": true, "ServeHTTP": true,
	"Len": true, "Less": true, "Swap": true,
}

// receiverType is the name of a method's receiver type: T for T, *T, T[P]
// and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
