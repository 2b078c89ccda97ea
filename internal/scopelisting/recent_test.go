package scopelisting

import (
	"fmt"
	"testing"
	"time"
)

// The list gives the most recently seen scopes first, at most the limit
// asked, and keeps at most four times the claim's scope limit.
func TestRecent(t *testing.T) {
	type Scope struct{ Kind, ID string }
	var l recent[Scope]
	if got := listed(&l, 5); len(got) != 0 {
		t.Fatalf("empty: listed %v", got)
	}
	t0 := time.Now()
	tenants := func(ids ...string) []Scope {
		var out []Scope
		for _, id := range ids {
			out = append(out, Scope{Kind: "tenant", ID: id})
		}
		return out
	}
	l.saw(tenants("a", "b"), t0, 1)
	l.saw(tenants("c"), t0.Add(time.Second), 1)
	got := listed(&l, 2)
	if len(got) != 2 || got[0].ID != "c" || got[1].ID != "a" {
		t.Fatalf("Recent(2) = %v, want c then a", got)
	}
	for i := range 10 {
		l.saw(tenants(fmt.Sprint("s", i)), t0.Add(time.Duration(2+i)*time.Second), 1)
	}
	if got := listed(&l, 100); len(got) != 4 || got[0].ID != "s9" || got[3].ID != "s6" {
		t.Fatalf("after 13 scopes with limit 1: %v, want s9..s6", got)
	}
	l.saw(tenants("late"), t0.Add(time.Hour), 1)
	if got := listed(&l, 100); len(got) != 1 || got[0].ID != "late" {
		t.Fatalf("an hour later: %v, want only late (the others expired)", got)
	}
}

// listed returns at most limit of the scopes l keeps, the most recently
// seen first.
func listed[S comparable](l *recent[S], limit int) []S {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.sorted()
	return all[:min(limit, len(all))]
}
