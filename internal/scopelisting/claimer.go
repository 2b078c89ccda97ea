package scopelisting

import (
	"context"
	"sync/atomic"
	"time"
)

// Claimer runs claim rounds over scopes for one claimer (a worker, a relay):
// it owns the listing the rounds reuse and the scopes seen recently. S is
// the discovery read's row type, R the claim's. Its zero value is ready.
type Claimer[S comparable, R any] struct {
	listing Listing[S]
	recent  recent[S]
	woke    atomic.Pointer[time.Time] // the last wake-up (Woke)
}

// Woke records a wake-up at t: the work it announces may be of a scope the
// listing, read before, lacks.
func (c *Claimer[S, R]) Woke(t time.Time) { c.woke.Store(&t) }

// wokeSinceRead reports whether a wake-up came after the listing's read.
func (c *Claimer[S, R]) wokeSinceRead() bool {
	t := c.woke.Load()
	return t != nil && c.listing.ReadBefore(*t)
}

// Source is how a Claimer reads and claims.
type Source[S comparable, R any] struct {
	// List reads at most limit scopes with due work, oldest due first.
	List func(ctx context.Context, limit int) ([]S, error)
	// Claim claims at most k rows of scope s, committed when it returns.
	Claim func(ctx context.Context, s S, k int) ([]R, error)
	// Fatal reports whether a claim error ends the round (the context or
	// the connection is gone) rather than skipping the scope (its node may
	// be down while the others are up).
	Fatal func(err error) bool
	// Listed, when set, sees the scope count of each read (tests).
	Listed func(n int)
	// Now is the clock that times the reads and the listing's freshness.
	// Defaults to time.Now; tests set their own.
	Now func() time.Time
}

func (src *Source[S, R]) now() time.Time {
	if src.Now != nil {
		return src.Now()
	}
	return time.Now()
}

// Round is what one Claim did.
type Round[S comparable, R any] struct {
	Rows []R // what the scopes' claims returned, at most n
	// More reports that more is probably due: the round filled n, or it
	// claimed and the listing keeps scopes it did not serve or that filled
	// their share.
	More bool
	// ListErr is the read's error. Fallback scopes seen recently were
	// claimed from instead; none when Fallback is 0.
	ListErr  error
	Fallback int
	// Failed are the scopes skipped because their claim failed.
	Failed []Failure[S]
	// Answered counts the claims that returned.
	Answered int
	// Fatal ended the round; the rows claimed before it are in Rows.
	Fatal error
}

// Failure is a scope whose claim failed.
type Failure[S any] struct {
	Scope S     // the scope skipped
	Err   error // its claim's error
}

// Claim runs one round: at most most scopes, at most n rows, each scope
// asked for its fair share of what n has left, and the scopes that filled
// their share asked again while n has room. The scopes come from the
// listing while it is fresh, from a new read otherwise; a round from the
// listing that claimed nothing reads again at once, so an empty round has
// always read afresh, and so does one that came back short after a
// wake-up (Woke) since the read: the wake-up's scope may be unlisted, and
// the wake-up is spent on this claim.
func (c *Claimer[S, R]) Claim(ctx context.Context, src Source[S, R], most, n int) Round[S, R] {
	reuse := c.listing.Fresh(src.now())
	r := c.round(ctx, src, most, n, reuse)
	if reuse && len(r.Failed) == 0 && r.Fatal == nil &&
		(len(r.Rows) == 0 || (len(r.Rows) < n && c.wokeSinceRead())) {
		// The listing's scopes ran dry, or the wake-up's may be unlisted:
		// others may be due since.
		more := c.round(ctx, src, most, n-len(r.Rows), false)
		more.Rows = append(r.Rows, more.Rows...)
		more.Answered += r.Answered
		return more
	}
	return r
}

func (c *Claimer[S, R]) round(ctx context.Context, src Source[S, R], most, n int, reuse bool) Round[S, R] {
	var r Round[S, R]
	var scopes []S
	listed, full := reuse, false // listed: the scopes come from the listing, not the fallback
	if reuse {
		scopes, full = c.listing.Turn(most)
	} else {
		start := src.now()
		limit := most * Wider
		all, err := src.List(ctx, limit)
		if err != nil {
			r.ListErr = err
			scopes = c.recent.turn(most)
			r.Fallback = len(scopes)
			if len(scopes) == 0 {
				return r
			}
		} else {
			end := src.now()
			c.recent.saw(all, end, limit)
			c.listing.Set(all, len(all) == limit, start, end.Sub(start))
			if src.Listed != nil {
				src.Listed(len(all))
			}
			scopes, full = c.listing.Turn(most)
			listed = true
		}
	}
	var short []S
	for len(scopes) > 0 && len(r.Rows) < n {
		share := max(1, (n-len(r.Rows)+len(scopes)-1)/len(scopes))
		var filled []S
		for _, s := range scopes {
			k := min(share, n-len(r.Rows))
			if k <= 0 {
				break
			}
			rows, err := src.Claim(ctx, s, k)
			if err != nil {
				if src.Fatal(err) {
					r.Fatal = err
					return r
				}
				r.Failed = append(r.Failed, Failure[S]{s, err})
				continue
			}
			r.Answered++
			r.Rows = append(r.Rows, rows...)
			if len(rows) == k {
				filled = append(filled, s)
			} else {
				short = append(short, s)
			}
		}
		scopes = filled
	}
	if listed {
		c.listing.Short(short)
	}
	r.More = len(r.Rows) == n || (listed && len(r.Rows) > 0 && (full || c.listing.Left()))
	return r
}
