// Package recentscopes remembers the scopes a claim's discovery read listed
// lately. On Citus that read covers every shard, so one worker node down
// fails it; the worker and the relay then claim from the scopes seen
// recently, and the tenants of the nodes still up keep flowing.
package recentscopes

import (
	"sort"
	"sync"
	"time"
)

// TTL is how long a listed scope stays a fallback.
const TTL = 10 * time.Minute

// List is the scopes seen lately, S being the discovery read's row type, so
// the callers keep their rows; its zero value is empty and ready.
type List[S comparable] struct {
	mu   sync.Mutex
	seen map[S]sighting
	n    uint64 // sightings so far, to order scopes seen at the same time
}

type sighting struct {
	at time.Time
	n  uint64
}

// Saw records scopes as listed at now, keeping at most 4*limit scopes (the
// most recently seen) and none older than TTL.
func (l *List[S]) Saw(scopes []S, now time.Time, limit int) {
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
		if now.Sub(at.at) > TTL {
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

// Recent returns at most limit of the scopes seen lately, the most recently
// seen first (within one listing, in the listing's order).
func (l *List[S]) Recent(limit int) []S {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.sorted()
	return all[:min(limit, len(all)):min(limit, len(all))]
}

// sorted returns the scopes, most recently seen first. l.mu is held.
func (l *List[S]) sorted() []S {
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
