package gen

import (
	"go/ast"
	"go/token"
	"sort"
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
	sort.SliceStable(emits, func(i, j int) bool {
		if emits[i].Type != emits[j].Type {
			return emits[i].Type < emits[j].Type
		}
		return emits[i].Version < emits[j].Version
	})
	type tv struct {
		t string
		v int
	}
	declared := map[tv]*outEvent{}
	var kept []*outEvent
	for _, em := range emits {
		k := tv{em.Type, em.Version}
		if first, dup := declared[k]; dup {
			errs.add(em.pos, "%s v%d is already emitted by %s at %s: each type and version is one Go type", em.Type, em.Version, first.GoType, first.pos)
			continue
		}
		declared[k] = em
		kept = append(kept, em)
	}
	return kept
}
