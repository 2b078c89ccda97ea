// Package scopelisting runs the claim rounds on Citus, where no statement
// may lock rows on several shards: a discovery read lists the scopes with
// due work (a read of every shard that groups every due row), then each
// scope is claimed on its own node (Claimer). The read's cost grows with
// the backlog (80 ms at 300,000 due receipts, more than the claims it
// feeds), so a listing that cost d is reused for Reuse x d, in turns
// (Listing): the read takes about a tenth of the claim loop's time at most
// whatever the backlog; after a cheap read the next round reads again.
// When the read fails (a worker node down) the rounds claim from the scopes
// listed recently.
package scopelisting

import (
	"sync"
	"time"
)

// Reuse is how many times its own cost a listing is reused for: the reads
// stay within a tenth of the claim loop's time, while a scope missing from
// the listing waits at most ten reads' time (a wake-up reads again sooner).
const Reuse = 9

// Wider is how many times a round's scopes a read lists: the rounds that
// reuse it take the listed scopes in turns.
const Wider = 4

// Listing is the last read's scopes not yet found short, S being the read's
// row type; its zero value is empty and ready.
type Listing[S comparable] struct {
	mu     sync.Mutex
	scopes []S // in turn order
	next   int // where the next turn begins
	full   bool
	until  time.Time
	readAt time.Time // when the read behind it began
}

// Fresh reports whether the listing still serves rounds at now: it holds
// scopes and was read less than Reuse times its cost ago.
func (l *Listing[S]) Fresh(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.scopes) > 0 && now.Before(l.until)
}

// ReadBefore reports whether the read behind the listing began before t.
func (l *Listing[S]) ReadBefore(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readAt.Before(t)
}

// Set records a read that began at start, took took and listed scopes; full
// reports that it listed as many as it may (others may be due).
func (l *Listing[S]) Set(scopes []S, full bool, start time.Time, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scopes = append(l.scopes[:0], scopes...)
	l.next = 0
	l.full = full
	l.readAt = start
	l.until = start.Add(took * (1 + Reuse))
}

// Turn returns at most k scopes, beginning after those the last turn took
// and going round; full reports that the read behind them was full.
func (l *Listing[S]) Turn(k int) (_ []S, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k = min(k, len(l.scopes))
	out := make([]S, 0, k)
	for range k {
		l.next %= len(l.scopes)
		out = append(out, l.scopes[l.next])
		l.next++
	}
	return out, l.full
}

// Short drops scopes whose claim came back short of what it asked: they may
// have no due work left. The next read lists them again if they do.
func (l *Listing[S]) Short(short []S) {
	if len(short) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	drop := make(map[S]bool, len(short))
	for _, s := range short {
		drop[s] = true
	}
	kept := l.scopes[:0]
	next := l.next
	for i, s := range l.scopes {
		if drop[s] {
			if i < l.next {
				next--
			}
			continue
		}
		kept = append(kept, s)
	}
	l.scopes, l.next = kept, next
}

// Left reports whether scopes remain that were not found short.
func (l *Listing[S]) Left() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.scopes) > 0
}
