package gen

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pginbox/pginbox/inboxtype"
)

// model is what the template renders.
type model struct {
	Package   string
	Queries   *queriesPkg // nil without -queries
	Events    []*event    // by event type, then version
	Consumers []*consumer // by name
}

type event struct {
	pos          token.Position
	GoType       string // the declared struct type
	Name         string // exported form of GoType, the stem of generated names
	Type         string
	Version      int
	Consumers    []*consumer // by name
	AllowUnknown bool
}

type consumer struct {
	pos    token.Position // first declaration naming it
	Name   string
	Ident  string
	Events []*event // by event type, then version
}

// directive keys, in the order the docs list them.
var directiveKeys = []string{"type", "version", "consumers", "unknown"}

const directivePrefix = "//inbox:"

// goFiles returns the package's non-test Go files that match the current build
// context, without the generator's own output.
func goFiles(dir, skip string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == skip {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func parseDir(fset *token.FileSet, dir, skip string) ([]*ast.File, error) {
	names, err := goFiles(dir, skip)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func load(cfg Config) (*model, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, cfg.Dir, cfg.Output)
	if err != nil {
		return nil, fmt.Errorf("inboxgen: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("inboxgen: no Go files in %s", cfg.Dir)
	}
	var errs Errors
	m := &model{Package: files[0].Name.Name}
	for _, f := range files[1:] {
		if f.Name.Name != m.Package {
			errs.add(fset.Position(f.Name.Pos()), "package %s, but %s is package %s", f.Name.Name, fset.Position(files[0].Name.Pos()).Filename, m.Package)
		}
	}

	events := collectEvents(fset, files, &errs)
	if len(events) == 0 && len(errs) == 0 {
		return nil, Errors{{Pos: token.Position{Filename: cfg.Dir}, Msg: fmt.Sprintf("no //inbox:event declarations in package %s", m.Package)}}
	}
	m.Events, m.Consumers = link(events, &errs)

	if cfg.Queries != "" {
		origin := cfg.Origin
		if origin == "" {
			origin = findOrigin(fset, files, cfg.Dir)
		}
		q, err := resolveQueries(cfg.Dir, cfg.Queries)
		if err != nil {
			errs.add(token.Position{Filename: origin}, "%v", err)
		} else {
			m.Queries = q
		}
	}

	checkNames(fset, files, m, &errs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return m, nil
}

// collectEvents reads every //inbox: directive. A directive must sit in the
// doc comment of one type declaration; anywhere else it is reported rather than
// silently ignored.
func collectEvents(fset *token.FileSet, files []*ast.File, errs *Errors) []*event {
	var events []*event
	for _, f := range files {
		seen := map[*ast.Comment]bool{}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			grouped := gd.Lparen.IsValid()
			if grouped {
				for _, c := range directives(gd.Doc) {
					seen[c] = true
					errs.add(fset.Position(c.Pos()), "//inbox:event above a type group: move it to the doc comment of one type inside the group")
				}
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc
				if !grouped {
					doc = gd.Doc
				}
				var first *ast.Comment
				for _, c := range directives(doc) {
					seen[c] = true
					pos := fset.Position(c.Pos())
					if !isEventDirective(c.Text) {
						errs.add(pos, "unknown directive %s (want //inbox:event)", directiveName(c.Text))
						continue
					}
					if first != nil {
						errs.add(pos, "type %s already has an //inbox:event directive at line %d: declare each version as its own type", ts.Name.Name, fset.Position(first.Pos()).Line)
						continue
					}
					first = c
					if ev := parseEvent(fset, ts, c, errs); ev != nil {
						events = append(events, ev)
					}
				}
			}
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if seen[c] || !strings.HasPrefix(c.Text, directivePrefix) {
					continue
				}
				pos := fset.Position(c.Pos())
				if isEventDirective(c.Text) {
					errs.add(pos, "//inbox:event must be in the doc comment of a package-level type declaration (directly above `type Name struct`)")
				} else {
					errs.add(pos, "unknown directive %s (want //inbox:event)", directiveName(c.Text))
				}
			}
		}
	}
	return events
}

func directives(doc *ast.CommentGroup) []*ast.Comment {
	if doc == nil {
		return nil
	}
	var out []*ast.Comment
	for _, c := range doc.List {
		if strings.HasPrefix(c.Text, directivePrefix) {
			out = append(out, c)
		}
	}
	return out
}

func directiveName(text string) string {
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		return text[:i]
	}
	return text
}

func isEventDirective(text string) bool { return directiveName(text) == "//inbox:event" }

// parseEvent checks one directive and its type. It reports every problem it
// finds and returns nil if there was any.
func parseEvent(fset *token.FileSet, ts *ast.TypeSpec, c *ast.Comment, errs *Errors) *event {
	pos := fset.Position(c.Pos())
	before := len(*errs)
	switch {
	case ts.Assign.IsValid():
		errs.add(fset.Position(ts.Name.Pos()), "%s is an alias, not a struct type: //inbox:event needs `type %s struct{...}`", ts.Name.Name, ts.Name.Name)
	case ts.TypeParams != nil:
		errs.add(fset.Position(ts.Name.Pos()), "%s is generic: an event payload must be a plain struct type", ts.Name.Name)
	default:
		if _, ok := ts.Type.(*ast.StructType); !ok {
			errs.add(fset.Position(ts.Name.Pos()), "%s is not a struct type: //inbox:event needs `type %s struct{...}`", ts.Name.Name, ts.Name.Name)
		}
	}

	ev := &event{pos: pos, GoType: ts.Name.Name, Name: exportedName(ts.Name.Name, "Event")}
	args, err := splitArgs(strings.TrimPrefix(c.Text, "//inbox:event"))
	if err != nil {
		errs.add(pos, "//inbox:event: %v", err)
		return nil
	}
	set := map[string]bool{}
	var consumers []string
	for _, a := range args {
		if !isKnownKey(a.key) {
			errs.add(pos, "//inbox:event: unknown key %q (known keys: %s)", a.key, strings.Join(directiveKeys, ", "))
			continue
		}
		if set[a.key] {
			errs.add(pos, "//inbox:event: key %q given twice", a.key)
			continue
		}
		set[a.key] = true
		switch a.key {
		case "type":
			if p := identityProblem(a.val); p != "" {
				errs.add(pos, "//inbox:event: event type %q: %s", a.val, p)
			}
			ev.Type = a.val
		case "version":
			v, err := strconv.Atoi(a.val)
			if err != nil || v < 1 || v > math.MaxInt32 {
				errs.add(pos, "//inbox:event: version must be an integer between 1 and %d, got %q", math.MaxInt32, a.val)
			}
			ev.Version = v
		case "consumers":
			dup := map[string]bool{}
			for _, name := range strings.Split(a.val, ",") {
				if p := identityProblem(name); p != "" {
					errs.add(pos, "//inbox:event: consumer %q: %s", name, p)
					continue
				}
				if dup[name] {
					errs.add(pos, "//inbox:event: consumer %q listed twice", name)
					continue
				}
				dup[name] = true
				consumers = append(consumers, name)
			}
		case "unknown":
			switch a.val {
			case "reject":
			case "allow":
				ev.AllowUnknown = true
			default:
				errs.add(pos, "//inbox:event: unknown must be \"reject\" or \"allow\", got %q", a.val)
			}
		}
	}
	for _, k := range []string{"type", "version", "consumers"} {
		if !set[k] {
			errs.add(pos, "//inbox:event on %s: missing %s", ts.Name.Name, k)
		}
	}
	if len(*errs) > before {
		return nil
	}
	sort.Strings(consumers)
	for _, name := range consumers {
		ev.Consumers = append(ev.Consumers, &consumer{pos: pos, Name: name})
	}
	return ev
}

func isKnownKey(k string) bool {
	for _, known := range directiveKeys {
		if k == known {
			return true
		}
	}
	return false
}

type arg struct{ key, val string }

// splitArgs splits `k=v k2="quoted v"` into pairs. Quoted values are Go string
// literals, so identity strings with spaces can be declared.
func splitArgs(s string) ([]arg, error) {
	var out []arg
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexAny(s, "= \t")
		if eq < 0 || s[eq] != '=' {
			return nil, fmt.Errorf("%q is not key=value", directiveName(s))
		}
		if eq == 0 {
			return nil, fmt.Errorf("missing key before %q", directiveName(s))
		}
		key := s[:eq]
		s = s[eq+1:]
		if strings.HasPrefix(s, `"`) {
			end := -1
			for i := 1; i < len(s); i++ {
				if s[i] == '\\' {
					i++
					continue
				}
				if s[i] == '"' {
					end = i
					break
				}
			}
			if end < 0 {
				return nil, fmt.Errorf("unterminated quoted value for %s", key)
			}
			v, err := strconv.Unquote(s[:end+1])
			if err != nil {
				return nil, fmt.Errorf("bad quoted value for %s: %s", key, s[:end+1])
			}
			s = s[end+1:]
			if s != "" && s[0] != ' ' && s[0] != '\t' {
				return nil, fmt.Errorf("want a space after the quoted value of %s", key)
			}
			out = append(out, arg{key, v})
			continue
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		out = append(out, arg{key, s[:end]})
		s = s[end:]
	}
}

// identityProblem applies the runtime's identity string rules, so a bad
// declaration fails generation instead of every accept. It returns "" when s
// is valid.
func identityProblem(s string) string {
	if rule, detail := inboxtype.CheckIdentityString(s); rule != "" {
		return detail
	}
	return ""
}

// link checks uniqueness across declarations and builds the consumer side.
func link(events []*event, errs *Errors) ([]*event, []*consumer) {
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].Type != events[j].Type {
			return events[i].Type < events[j].Type
		}
		return events[i].Version < events[j].Version
	})
	type tv struct {
		t string
		v int
	}
	declared := map[tv]*event{}
	byName := map[string]*consumer{}
	byIdent := map[string]*consumer{}
	var kept []*event
	for _, ev := range events {
		k := tv{ev.Type, ev.Version}
		if first, dup := declared[k]; dup {
			errs.add(ev.pos, "%s v%d is already declared by %s at %s: each type and version is one Go type", ev.Type, ev.Version, first.GoType, first.pos)
			continue
		}
		declared[k] = ev
		kept = append(kept, ev)
		for i, c := range ev.Consumers {
			shared, ok := byName[c.Name]
			if !ok {
				c.Ident = exportedName(identWords(c.Name), "Consumer")
				if other, clash := byIdent[c.Ident]; clash {
					errs.add(ev.pos, "consumers %q and %q both become the Go name %s: rename one", other.Name, c.Name, c.Ident)
					continue
				}
				byName[c.Name], byIdent[c.Ident] = c, c
				shared = c
			}
			ev.Consumers[i] = shared
			shared.Events = append(shared.Events, ev)
		}
	}
	consumers := make([]*consumer, 0, len(byName))
	for _, c := range byName {
		consumers = append(consumers, c)
	}
	sort.Slice(consumers, func(i, j int) bool { return consumers[i].Name < consumers[j].Name })
	return kept, consumers
}

// identWords turns "orders.projection.v1" into "OrdersProjectionV1".
func identWords(s string) string {
	var b strings.Builder
	upper := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// exportedName capitalizes s, prefixing it when it cannot start an exported
// identifier (a digit, or a letter without case).
func exportedName(s, prefix string) string {
	s = strings.TrimLeft(s, "_")
	if s != "" {
		r, n := utf8.DecodeRuneInString(s)
		s = string(unicode.ToUpper(r)) + s[n:]
	}
	if !token.IsExported(s) || !token.IsIdentifier(s) {
		return prefix + s
	}
	return s
}

// findOrigin locates the //go:generate line that runs inboxgen, for errors
// about its flags when $GOFILE/$GOLINE are not available.
func findOrigin(fset *token.FileSet, files []*ast.File, dir string) string {
	for _, f := range files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//go:generate ") && strings.Contains(c.Text, "inboxgen") {
					p := fset.Position(c.Pos())
					return fmt.Sprintf("%s:%d", p.Filename, p.Line)
				}
			}
		}
	}
	return dir
}
