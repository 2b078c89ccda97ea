package inbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/pginbox/pginbox/db"
)

// recentScopes lists the most recently seen scopes first, at most the
// limit asked, and keeps at most four times the claim's scope limit.
func TestRecentScopes(t *testing.T) {
	var r recentScopes
	if got := r.list(5); len(got) != 0 {
		t.Fatalf("empty: listed %v", got)
	}
	t0 := time.Now()
	rows := func(ids ...string) []db.ReceiptDueScopesRow {
		var out []db.ReceiptDueScopesRow
		for _, id := range ids {
			out = append(out, db.ReceiptDueScopesRow{ScopeKind: "tenant", ScopeID: id})
		}
		return out
	}
	r.saw(rows("a", "b"), t0, 1)
	r.saw(rows("c"), t0.Add(time.Second), 1)
	got := r.list(2)
	if len(got) != 2 || got[0].ScopeID != "c" || got[1].ScopeID != "a" {
		t.Fatalf("list(2) = %v, want c then a", got)
	}
	for i := range 10 {
		r.saw(rows(fmt.Sprint("s", i)), t0.Add(time.Duration(2+i)*time.Second), 1)
	}
	if got := r.list(100); len(got) != 4 || got[0].ScopeID != "s9" || got[3].ScopeID != "s6" {
		t.Fatalf("after 13 scopes with limit 1: %v, want s9..s6", got)
	}
	r.saw(rows("late"), t0.Add(time.Hour), 1)
	if got := r.list(100); len(got) != 1 || got[0].ScopeID != "late" {
		t.Fatalf("an hour later: %v, want only late (the others expired)", got)
	}
}
