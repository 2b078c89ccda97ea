package scopelisting

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// fakeDB is a backlog per scope; List lists the scopes with some left, in
// name order, and takes listCost on the source's clock.
type fakeDB struct {
	due      map[string]int
	down     map[string]bool // claims of these scopes fail
	listErr  error
	listCost time.Duration
	reads    int
	claims   []string  // "scope:k" per claim asked
	clock    time.Time // the source's Now
}

func (f *fakeDB) source() Source[string, string] {
	return Source[string, string]{
		List: func(_ context.Context, limit int) ([]string, error) {
			f.reads++
			f.clock = f.clock.Add(f.listCost)
			if f.listErr != nil {
				return nil, f.listErr
			}
			var out []string
			for s, n := range f.due {
				if n > 0 {
					out = append(out, s)
				}
			}
			slices.Sort(out)
			return out[:min(limit, len(out))], nil
		},
		Claim: func(_ context.Context, s string, k int) ([]string, error) {
			f.claims = append(f.claims, s+":"+string(rune('0'+k)))
			if f.down[s] {
				return nil, errors.New("node down")
			}
			got := min(k, f.due[s])
			f.due[s] -= got
			return slices.Repeat([]string{s}, got), nil
		},
		Fatal: func(err error) bool { return err.Error() == "fatal" },
		Now:   func() time.Time { return f.clock },
	}
}

// Each scope is asked for its share of what the round has left; a scope
// that filled its share is asked again while there is room, one that came
// back short leaves the listing.
func TestClaimerSharesTheRound(t *testing.T) {
	f := &fakeDB{due: map[string]int{"a": 100, "b": 2, "c": 100}, listCost: 20 * time.Millisecond}
	var c Claimer[string, string]
	r := c.Claim(t.Context(), f.source(), 3, 10)
	if len(r.Rows) != 10 || !r.More || r.Answered != 3 || f.reads != 1 {
		t.Fatalf("round = %d rows, more %v, %d answered, %d reads; want 10, true, 3, 1", len(r.Rows), r.More, r.Answered, f.reads)
	}
	if want := []string{"a:4", "b:4", "c:4"}; !slices.Equal(f.claims, want) {
		t.Fatalf("claims asked %v, want %v", f.claims, want)
	}
	// The listing is fresh (a 20 ms read serves 80 ms more): the next round
	// reuses it without b, which came back short.
	f.claims = nil
	r = c.Claim(t.Context(), f.source(), 3, 10)
	if f.reads != 1 || len(r.Rows) != 10 {
		t.Fatalf("second round: %d reads, %d rows; want 1 read (reused), 10 rows", f.reads, len(r.Rows))
	}
	if want := []string{"a:5", "c:5"}; !slices.Equal(f.claims, want) {
		t.Fatalf("second round asked %v, want %v", f.claims, want)
	}
}

// A round from the listing that claims nothing reads again at once: an empty
// round has always read afresh, so it sees a scope due since the read.
func TestClaimerEmptyReuseReadsAgain(t *testing.T) {
	f := &fakeDB{due: map[string]int{"a": 3}, listCost: 50 * time.Millisecond}
	var c Claimer[string, string]
	if r := c.Claim(t.Context(), f.source(), 4, 3); len(r.Rows) != 3 {
		t.Fatalf("first round claimed %d, want 3", len(r.Rows))
	}
	f.due["a"], f.due["z"] = 0, 2 // a ran dry without coming back short; z is new
	r := c.Claim(t.Context(), f.source(), 4, 3)
	if f.reads != 2 || !slices.Equal(r.Rows, []string{"z", "z"}) {
		t.Fatalf("%d reads, rows %v; want 2 reads and z's two rows", f.reads, r.Rows)
	}
}

// The read failing (a worker node down) falls back to the scopes listed
// recently; a scope whose claim fails is skipped and the others claim; a
// fatal error ends the round with the rows claimed before it.
func TestClaimerFallsBackAndSkips(t *testing.T) {
	f := &fakeDB{due: map[string]int{"a": 1, "b": 1, "c": 1}}
	var c Claimer[string, string]
	c.Claim(t.Context(), f.source(), 4, 3)
	f.clock = f.clock.Add(10 * time.Millisecond) // the read (instant) is stale by far

	f.due = map[string]int{"a": 5, "b": 5, "c": 5}
	f.listErr, f.down = errors.New("node 2 down"), map[string]bool{"b": true}
	r := c.Claim(t.Context(), f.source(), 4, 4)
	if r.ListErr == nil || r.Fallback != 3 {
		t.Fatalf("ListErr %v, Fallback %d; want the read's error and 3 recent scopes", r.ListErr, r.Fallback)
	}
	if len(r.Failed) < 1 || r.Failed[0].Scope != "b" || len(r.Rows) != 4 || r.Answered == 0 {
		t.Fatalf("failed %v, %d rows, %d answered; want b skipped and 4 rows from a and c", r.Failed, len(r.Rows), r.Answered)
	}

	var empty Claimer[string, string]
	if r := empty.Claim(t.Context(), f.source(), 4, 4); r.ListErr == nil || r.Fallback != 0 || len(r.Rows) != 0 {
		t.Fatalf("nothing seen recently: %+v; want the read's error and no rows", r)
	}

	f.listErr, f.down = nil, nil
	src := f.source()
	calls := 0
	claim := src.Claim
	src.Claim = func(ctx context.Context, s string, k int) ([]string, error) {
		if calls++; calls == 2 {
			return nil, errors.New("fatal")
		}
		return claim(ctx, s, k)
	}
	var fresh Claimer[string, string]
	r = fresh.Claim(t.Context(), src, 4, 6)
	if r.Fatal == nil || len(r.Rows) != 2 {
		t.Fatalf("Fatal %v, %d rows; want the fatal error and the first scope's 2 rows", r.Fatal, len(r.Rows))
	}
}

// While the read fails (a worker node down), the rounds serve every scope
// seen recently in turns, not the same few: a scope of a running node with
// due work must not wait for the read to work again because others were
// listed after it.
func TestClaimerFallbackServesEveryRecentScopeInTurns(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	f := &fakeDB{due: map[string]int{}}
	for _, s := range names {
		f.due[s] = 1
	}
	var c Claimer[string, string]
	c.Claim(t.Context(), f.source(), 16, 16) // lists all ten and drains them
	for _, s := range names {
		f.due[s] = 100
	}
	f.listErr = errors.New("node 2 down")
	f.claims = nil
	served := map[string]bool{}
	for round := range 3 {
		r := c.Claim(t.Context(), f.source(), 4, 4)
		if r.ListErr == nil || r.Fallback == 0 {
			t.Fatalf("round %d: ListErr %v, Fallback %d; want the read's error and a fallback", round, r.ListErr, r.Fallback)
		}
		for _, s := range r.Rows {
			served[s] = true
		}
	}
	for _, s := range names {
		if !served[s] {
			t.Errorf("scope %s got no claim in 3 fallback rounds of 4 scopes over 10 scopes seen recently (claims asked: %v)", s, f.claims)
		}
	}
}

// A wake-up after the listing was read may announce a scope the listing
// lacks: a round served from the listing that comes back short then reads
// again, so the new scope is claimed now and not at the next poll (the
// wake-up was spent on this claim).
func TestClaimerWokenAfterTheReadReadsAgainWhenShort(t *testing.T) {
	f := &fakeDB{due: map[string]int{"a": 3}, listCost: time.Millisecond}
	src := f.source()
	var c Claimer[string, string]
	if r := c.Claim(t.Context(), src, 4, 2); len(r.Rows) != 2 {
		t.Fatalf("first claim: %v", r.Rows)
	}
	f.due["b"] = 5 // due after the read, with its wake-up
	c.Woke(f.clock)
	r := c.Claim(t.Context(), src, 4, 4)
	got := map[string]int{}
	for _, s := range r.Rows {
		got[s]++
	}
	if got["b"] == 0 {
		t.Fatalf("the claim after a wake-up served %v from the old listing: b, due since, waits for a poll", got)
	}
	// Without a wake-up since the read, a short round from a fresh listing
	// does not read again: reads stay bounded by the listing's reuse.
	f.due["c"] = 5
	reads := f.reads
	c.Claim(t.Context(), src, 4, 100)
	if f.reads != reads {
		t.Fatalf("a short round without a wake-up read %d times, want the listing reused", f.reads-reads)
	}
}
