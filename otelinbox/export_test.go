package otelinbox

import "time"

// SetBacklogClock replaces the clock that times Config.BacklogInterval, so
// tests decide when the cached backlog expires.
func SetBacklogClock(b *BacklogObserver, now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = now
}
