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
	"slices"
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
	Emits     []*outEvent // outbox events, by event type, then version
}

type event struct {
	pos          token.Position
	GoType       string // the declared struct type
	Name         string // exported form of GoType, the stem of generated names
	Type         string
	Version      int
	Consumers    []*consumer // by name
	AllowUnknown bool
	// OrderingField is the payload field whose value is the message's
	// ordering key (ordering=Field); "" for an unordered event.
	OrderingField string
}

// outEvent is an event the package emits into the outbox (//outbox:event).
type outEvent struct {
	pos         token.Position
	GoType      string
	Name        string
	Type        string
	Version     int
	Source      string
	Destination string
}

type consumer struct {
	pos    token.Position // first declaration naming it
	Name   string
	Ident  string
	Events []*event // by event type, then version
}

// directive keys, in the order the docs list them.
var (
	directiveKeys = []string{"type", "version", "consumers", "unknown", "ordering"}
	emitKeys      = []string{"type", "version", "source", "destination"}
)

// The directives, and the prefixes that mark a comment as meant for inboxgen.
const (
	inboxDirective  = "//inbox:event"
	outboxDirective = "//outbox:event"
)

var directivePrefixes = []string{"//inbox:", "//outbox:"}

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

	events, emits := collectEvents(fset, files, &errs)
	if len(events) == 0 && len(emits) == 0 && len(errs) == 0 {
		return nil, Errors{{Pos: token.Position{Filename: cfg.Dir}, Msg: fmt.Sprintf("no //inbox:event or //outbox:event declarations in package %s", m.Package)}}
	}
	m.Events, m.Consumers = link(events, &errs)
	m.Emits = linkEmits(emits, &errs)

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

// collectEvents reads every //inbox: and //outbox: directive. A directive
// must sit in the doc comment of one type declaration; anywhere else it is
// reported rather than silently ignored.
func collectEvents(fset *token.FileSet, files []*ast.File, errs *Errors) ([]*event, []*outEvent) {
	var events []*event
	var emits []*outEvent
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
					errs.add(fset.Position(c.Pos()), "%s above a type group: move it to the doc comment of one type inside the group", directiveName(c.Text))
				}
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc
				if !grouped {
					doc = gd.Doc
				}
				ev, em := typeDirectives(fset, ts, doc, seen, errs)
				if ev != nil {
					events = append(events, ev)
				}
				if em != nil {
					emits = append(emits, em)
				}
			}
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if seen[c] || !isDirective(c.Text) {
					continue
				}
				pos := fset.Position(c.Pos())
				if name := directiveName(c.Text); name == inboxDirective || name == outboxDirective {
					errs.add(pos, "%s must be in the doc comment of a package-level type declaration (directly above `type Name struct`)", name)
				} else {
					errs.add(pos, "unknown directive %s (want %s or %s)", name, inboxDirective, outboxDirective)
				}
			}
		}
	}
	return events, emits
}

// typeDirectives parses the directives in one type's doc comment: at most
// one of each kind, on a plain struct type, and when both are there, for the
// same event type and version.
func typeDirectives(fset *token.FileSet, ts *ast.TypeSpec, doc *ast.CommentGroup, seen map[*ast.Comment]bool, errs *Errors) (*event, *outEvent) {
	list := directives(doc)
	if len(list) == 0 {
		return nil, nil
	}
	before := len(*errs)
	checkTarget(fset, ts, errs)
	var ev *event
	var em *outEvent
	first := map[string]*ast.Comment{}
	for _, c := range list {
		seen[c] = true
		pos := fset.Position(c.Pos())
		name := directiveName(c.Text)
		if name != inboxDirective && name != outboxDirective {
			errs.add(pos, "unknown directive %s (want %s or %s)", name, inboxDirective, outboxDirective)
			continue
		}
		if prev := first[name]; prev != nil {
			errs.add(pos, "type %s already has an %s directive at line %d: declare each version as its own type", ts.Name.Name, name, fset.Position(prev.Pos()).Line)
			continue
		}
		first[name] = c
		if name == inboxDirective {
			ev = parseEvent(fset, ts, c, errs)
		} else {
			em = parseEmit(fset, ts, c, errs)
		}
	}
	if ev != nil && em != nil && (ev.Type != em.Type || ev.Version != em.Version) {
		errs.add(em.pos, "type %s is %s v%d for the inbox (line %d) but %s v%d for the outbox: one Go type is one event type and version",
			ts.Name.Name, ev.Type, ev.Version, ev.pos.Line, em.Type, em.Version)
	}
	if len(*errs) > before {
		return nil, nil
	}
	return ev, em
}

// checkTarget reports a directive's type that is not a plain struct type.
func checkTarget(fset *token.FileSet, ts *ast.TypeSpec, errs *Errors) {
	switch {
	case ts.Assign.IsValid():
		errs.add(fset.Position(ts.Name.Pos()), "%s is an alias, not a struct type: an event needs `type %s struct{...}`", ts.Name.Name, ts.Name.Name)
	case ts.TypeParams != nil:
		errs.add(fset.Position(ts.Name.Pos()), "%s is generic: an event payload must be a plain struct type", ts.Name.Name)
	default:
		if _, ok := ts.Type.(*ast.StructType); !ok {
			errs.add(fset.Position(ts.Name.Pos()), "%s is not a struct type: an event needs `type %s struct{...}`", ts.Name.Name, ts.Name.Name)
		}
	}
}

func directives(doc *ast.CommentGroup) []*ast.Comment {
	if doc == nil {
		return nil
	}
	var out []*ast.Comment
	for _, c := range doc.List {
		if isDirective(c.Text) {
			out = append(out, c)
		}
	}
	return out
}

func isDirective(text string) bool {
	for _, p := range directivePrefixes {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

func directiveName(text string) string {
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		return text[:i]
	}
	return text
}

// parseEvent checks one //inbox:event directive. It reports every problem
// it finds and returns nil if there was any.
func parseEvent(fset *token.FileSet, ts *ast.TypeSpec, c *ast.Comment, errs *Errors) *event {
	pos := fset.Position(c.Pos())
	before := len(*errs)
	vals := parseKeys(pos, ts.Name.Name, inboxDirective, c.Text, directiveKeys, []string{"type", "version", "consumers"}, errs)
	if vals == nil {
		return nil
	}
	ev := &event{pos: pos, GoType: ts.Name.Name, Name: exportedName(ts.Name.Name, "Event")}
	ev.Type, ev.Version = parseTypeVersion(pos, inboxDirective, vals, errs)
	var consumers []string
	if list, ok := vals["consumers"]; ok {
		dup := map[string]bool{}
		for _, name := range strings.Split(list, ",") {
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
	}
	switch u, ok := vals["unknown"]; {
	case !ok, u == "reject":
	case u == "allow":
		ev.AllowUnknown = true
	default:
		errs.add(pos, "//inbox:event: unknown must be \"reject\" or \"allow\", got %q", u)
	}
	if f, ok := vals["ordering"]; ok {
		ev.OrderingField = f
		checkOrderingField(pos, ts, f, errs)
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

// parseKeys splits a directive's key=value pairs, reporting unknown keys,
// keys given twice and missing required keys. It returns nil when the text
// cannot be split at all.
func parseKeys(pos token.Position, typeName, directive, text string, known, required []string, errs *Errors) map[string]string {
	args, err := splitArgs(strings.TrimPrefix(text, directive))
	if err != nil {
		errs.add(pos, "%s: %v", directive, err)
		return nil
	}
	vals := map[string]string{}
	for _, a := range args {
		if !slices.Contains(known, a.key) {
			errs.add(pos, "%s: unknown key %q (known keys: %s)", directive, a.key, strings.Join(known, ", "))
			continue
		}
		if _, dup := vals[a.key]; dup {
			errs.add(pos, "%s: key %q given twice", directive, a.key)
			continue
		}
		vals[a.key] = a.val
	}
	for _, k := range required {
		if _, ok := vals[k]; !ok {
			errs.add(pos, "%s on %s: missing %s", directive, typeName, k)
		}
	}
	return vals
}

// parseTypeVersion checks the type and version keys every directive has.
func parseTypeVersion(pos token.Position, directive string, vals map[string]string, errs *Errors) (string, int) {
	typ, hasType := vals["type"]
	if p := identityProblem(typ); hasType && p != "" {
		errs.add(pos, "%s: event type %q: %s", directive, typ, p)
	}
	version := 0
	if v, ok := vals["version"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > math.MaxInt32 {
			errs.add(pos, "%s: version must be an integer between 1 and %d, got %q", directive, math.MaxInt32, v)
		}
		version = n
	}
	return typ, version
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
	sortByTypeVersion(events, (*event).key)
	declared := map[typeVersion]*event{}
	byName := map[string]*consumer{}
	byIdent := map[string]*consumer{}
	var kept []*event
	for _, ev := range events {
		k := ev.key()
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

// checkOrderingField reports an ordering=Field that names no string field
// of the event's struct: the generated message builder reads p.Field.
func checkOrderingField(pos token.Position, ts *ast.TypeSpec, name string, errs *Errors) {
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return // checkTarget reports it
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name != name {
				continue
			}
			if !n.IsExported() {
				errs.add(pos, "//inbox:event: ordering field %s of %s is not exported", name, ts.Name.Name)
				return
			}
			if id, ok := f.Type.(*ast.Ident); !ok || id.Name != "string" {
				errs.add(pos, "//inbox:event: ordering field %s of %s must be a string field", name, ts.Name.Name)
			}
			return
		}
	}
	errs.add(pos, "//inbox:event: ordering=%s: %s has no field %s (ordering names the payload field whose value is the ordering key)", name, ts.Name.Name, name)
}
