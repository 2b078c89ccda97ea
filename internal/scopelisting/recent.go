package scopelisting

import (
	"sort"
	"sync"
	"time"
)

// RecentTTL is how long a listed scope stays a fallback.
const RecentTTL = 10 * time.Minute

// recent is the scopes the discovery read listed lately; its zero value is
// empty and ready. That read covers every shard, so one worker node down
// fails it; the rounds then claim from the scopes seen recently, in turns,
// and the tenants of the nodes still up keep flowing.
type recent[S comparable] struct {
	mu   sync.Mutex
	seen map[S]sighting
	n    uint64 // sightings so far, to order scopes seen at the same time
	next int    // where the next fallback round starts in the sorted scopes
}

type sighting struct {
	at time.Time
	n  uint64
}

// saw records scopes as listed at now, keeping at most 4*limit scopes (the
// most recently seen) and none older than RecentTTL.
func (l *recent[S]) saw(scopes []S, now time.Time, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = make(map[S]sighting)
	}
	for _, s := range scopes {
		l.n++
		l.seen[s] = sighting{at: now, n: l.n}
	}
	for s, at := range l.seen {
		if now.Sub(at.at) > RecentTTL {
			delete(l.seen, s)
		}
	}
	if over := len(l.seen) - 4*limit; over > 0 {
		all := l.sorted()
		for _, s := range all[len(all)-over:] {
			delete(l.seen, s)
		}
	}
}

// turn returns the next limit of the scopes seen lately, going round them
// in turns (in recent's order) across calls, so that while the read fails
// every scope it listed lately gets claims, not only the last few.
func (l *recent[S]) turn(limit int) []S {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.sorted()
	k := min(limit, len(all))
	if k == 0 {
		return nil
	}
	start := l.next % len(all)
	out := make([]S, 0, k)
	for i := range k {
		out = append(out, all[(start+i)%len(all)])
	}
	l.next = start + k
	return out
}

// sorted returns the scopes, most recently seen first. l.mu is held.
func (l *recent[S]) sorted() []S {
	all := make([]S, 0, len(l.seen))
	for s := range l.seen {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := l.seen[all[i]], l.seen[all[j]]
		if !a.at.Equal(b.at) {
			return a.at.After(b.at)
		}
		return a.n < b.n
	})
	return all
}
