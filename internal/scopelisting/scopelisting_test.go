package scopelisting

import (
	"slices"
	"testing"
	"time"
)

// A read is reused for Reuse times its cost, its scopes served in turns;
// scopes found short leave the turns, and an empty listing is stale.
func TestListing(t *testing.T) {
	var l Listing[string]
	t0 := time.Now()
	if l.Fresh(t0) || l.Left() {
		t.Fatal("the zero listing is fresh or holds scopes")
	}
	l.Set([]string{"a", "b", "c", "d", "e"}, true, t0, 10*time.Millisecond)
	until := t0.Add(10 * time.Millisecond * (1 + Reuse))
	if !l.Fresh(until.Add(-time.Millisecond)) || l.Fresh(until) {
		t.Fatalf("a read of 10 ms begun at t0 must serve until t0+%v (its 10 ms and %d x 10 ms after)", until.Sub(t0), Reuse)
	}
	turn := func(k int, want ...string) {
		t.Helper()
		got, full := l.Turn(k)
		if !slices.Equal(got, want) || !full {
			t.Fatalf("Turn(%d) = %v, %v; want %v, true", k, got, full, want)
		}
	}
	turn(2, "a", "b")
	turn(2, "c", "d")
	l.Short([]string{"b", "d"}) // before the cursor: the turn goes on at e
	turn(2, "e", "a")
	l.Short([]string{"e"})
	turn(5, "c", "a") // a turn never repeats a scope
	l.Short([]string{"a", "c"})
	if l.Left() || l.Fresh(t0) {
		t.Fatal("every scope ran short, yet the listing holds some")
	}
	l.Set([]string{"x"}, false, t0, time.Millisecond)
	if got, full := l.Turn(3); !slices.Equal(got, []string{"x"}) || full {
		t.Fatalf("after a new read: %v, %v; want [x], false", got, full)
	}
}
