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

// Scope is a scope's kind and ID.
type Scope struct{ Kind, ID string }

// List is the scopes seen lately; its zero value is empty and ready.
type List struct {
	mu   sync.Mutex
	seen map[Scope]time.Time
}

// Saw records scopes as listed at now, keeping at most 4*limit scopes (the
// most recently seen) and none older than TTL.
func (l *List) Saw(scopes []Scope, now time.Time, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = make(map[Scope]time.Time)
	}
	for _, s := range scopes {
		l.seen[s] = now
	}
	for s, at := range l.seen {
		if now.Sub(at) > TTL {
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
// seen first.
func (l *List) Recent(limit int) []Scope {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.sorted()
	return all[:min(limit, len(all)):min(limit, len(all))]
}

// sorted returns the scopes, most recently seen first. l.mu is held.
func (l *List) sorted() []Scope {
	all := make([]Scope, 0, len(l.seen))
	for s := range l.seen {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := l.seen[all[i]], l.seen[all[j]]
		if !a.Equal(b) {
			return a.After(b)
		}
		return all[i].Kind < all[j].Kind || (all[i].Kind == all[j].Kind && all[i].ID < all[j].ID)
	})
	return all
}
