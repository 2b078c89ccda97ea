package gen

import (
	"cmp"
	"go/ast"
	"go/token"
	"slices"
)

// parseEmit checks one //outbox:event directive. It reports every problem it
// finds and returns nil if there was any.
func parseEmit(fset *token.FileSet, ts *ast.TypeSpec, c *ast.Comment, errs *Errors) *outEvent {
	pos := fset.Position(c.Pos())
	before := len(*errs)
	vals := parseKeys(pos, ts.Name.Name, outboxDirective, c.Text, emitKeys, emitKeys, errs)
	if vals == nil {
		return nil
	}
	em := &outEvent{pos: pos, GoType: ts.Name.Name, Name: exportedName(ts.Name.Name, "Event")}
	em.Type, em.Version = parseTypeVersion(pos, outboxDirective, vals, errs)
	for _, k := range []string{"source", "destination"} {
		v, ok := vals[k]
		if p := identityProblem(v); ok && p != "" {
			errs.add(pos, "%s: %s %q: %s", outboxDirective, k, v, p)
		}
	}
	em.Source, em.Destination = vals["source"], vals["destination"]
	if len(*errs) > before {
		return nil
	}
	return em
}

// linkEmits sorts the outbox events and rejects a type and version declared
// by two Go types.
func linkEmits(emits []*outEvent, errs *Errors) []*outEvent {
	sortByTypeVersion(emits, (*outEvent).key)
	declared := map[typeVersion]*outEvent{}
	var kept []*outEvent
	for _, em := range emits {
		k := em.key()
		if first, dup := declared[k]; dup {
			errs.add(em.pos, "%s v%d is already emitted by %s at %s: each type and version is one Go type", em.Type, em.Version, first.GoType, first.pos)
			continue
		}
		declared[k] = em
		kept = append(kept, em)
	}
	return kept
}

// typeVersion identifies an event version among the declarations.
type typeVersion struct {
	t string
	v int
}

func (e *event) key() typeVersion    { return typeVersion{e.Type, e.Version} }
func (e *outEvent) key() typeVersion { return typeVersion{e.Type, e.Version} }

// sortByTypeVersion orders declarations by event type, then version.
func sortByTypeVersion[T any](xs []T, key func(T) typeVersion) {
	slices.SortStableFunc(xs, func(a, b T) int {
		ka, kb := key(a), key(b)
		return cmp.Or(cmp.Compare(ka.t, kb.t), cmp.Compare(ka.v, kb.v))
	})
}
