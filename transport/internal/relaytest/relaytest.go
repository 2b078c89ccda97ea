// Package relaytest holds what the broker publishers' tests share: events
// emitted into a real outbox, a relay publishing them, a tally of what a
// broker consumer received (lost, doubled, order per ordering key), and the
// child process of the relay crash test.
package relaytest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
)

// What every emitted event carries, for the consumers' checks.
const (
	Source      = "orders"
	EventType   = drill.EventType
	Version     = drill.SchemaVersion
	MetadataKey = "tenant"
	MetadataVal = "acme"
)

// Keys is the number of ordering keys Emit spreads events over; every
// fifth event has no key.
const Keys = 4

// Event is the n-th test event for destination.
func Event(destination string, n int) outbox.Event {
	key := fmt.Sprintf("order-%d", n%Keys)
	if n%5 == 4 {
		key = ""
	}
	return outbox.Event{
		Type:          EventType,
		SchemaVersion: Version,
		Source:        Source,
		Destination:   destination,
		OrderingKey:   key,
		Payload:       map[string]any{"n": n, "key": key},
		Metadata:      map[string]string{MetadataKey: MetadataVal},
	}
}

// Emitted is what Emit committed: IDs in emit order and each one's key.
type Emitted struct {
	IDs  []string          // event IDs, in emit order
	Keys map[string]string // ID -> ordering key ("" for none)
}

// Emit commits n events for destination, ten per transaction, and returns
// them.
func Emit(t testing.TB, pool *pgxpool.Pool, destination string, n int) Emitted {
	t.Helper()
	e := Emitted{Keys: map[string]string{}}
	e.More(t, pool, destination, n)
	return e
}

// More commits n more events for destination, numbered after those in e,
// and adds them to e.
func (e *Emitted) More(t testing.TB, pool *pgxpool.Pool, destination string, n int) {
	t.Helper()
	from := len(e.IDs)
	for start := from; start < from+n; start += 10 {
		err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			for i := start; i < min(start+10, from+n); i++ {
				ev := Event(destination, i)
				id, err := outbox.Emit(context.Background(), tx, ev)
				if err != nil {
					return err
				}
				e.IDs = append(e.IDs, id.String())
				e.Keys[id.String()] = ev.OrderingKey
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Pool is a pool on a fresh migrated database (dsn from inboxtest.Database).
func Pool(t testing.TB, dsn string) *pgxpool.Pool { return drill.Pool(t, dsn, nil) }

// Relay is a relay on pool with short polls and fast retries, logging errors
// to the test.
func Relay(t testing.TB, pool *pgxpool.Pool, pub outbox.Publisher, log *slog.Logger) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{
		PollInterval: 50 * time.Millisecond,
		Lease:        30 * time.Second,
		MaxAttempts:  1000, // the fault drills retry through outages
		Backoff:      func(int) time.Duration { return 100 * time.Millisecond },
		Logger:       log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Published is how many events the outbox marked PUBLISHED.
func Published(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_outbox WHERE status = 'PUBLISHED'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Received collects what a broker consumer read, in arrival order; it is
// safe for concurrent use.
type Received struct {
	mu  sync.Mutex
	ids []string
}

// Add records one received message ID.
func (r *Received) Add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

// Distinct is the number of distinct IDs received.
func (r *Received) Distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range r.ids {
		seen[id] = true
	}
	return len(seen)
}

// Len is the number of messages received, duplicates included.
func (r *Received) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// Report prints the drill's figures and fails the test when an emitted
// event never arrived, or when the first arrivals of one ordering key are
// out of emit order. allowDoubles is false where the broker deduplicates.
func (r *Received) Report(t testing.TB, name string, e Emitted, published int, allowDoubles bool) {
	t.Helper()
	r.mu.Lock()
	ids := slices.Clone(r.ids)
	r.mu.Unlock()
	times := map[string]int{}
	var firsts []string
	for _, id := range ids {
		if times[id] == 0 {
			firsts = append(firsts, id)
		}
		times[id]++
	}
	lost, doubled := 0, 0
	for _, id := range e.IDs {
		switch n := times[id]; {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	line := fmt.Sprintf("%s: sent=%d published=%d received=%d lost=%d doubled=%d", name, len(e.IDs), published, len(ids), lost, doubled)
	t.Log(line)
	if lost != 0 || len(times) != len(e.IDs) || (doubled != 0 && !allowDoubles) {
		t.Fatalf("drill failed: %s (%d distinct IDs received)", line, len(times))
	}
	// Per key, first arrivals follow emit order (a redelivery may repeat an
	// earlier event later; that is a duplicate, not a reordering).
	pos := map[string]int{}
	for i, id := range e.IDs {
		pos[id] = i
	}
	last := map[string]int{}
	for _, id := range firsts {
		k := e.Keys[id]
		if k == "" {
			continue
		}
		if p, ok := last[k]; ok && pos[id] < p {
			t.Fatalf("%s: ordering key %q: event %s (emitted #%d) arrived after #%d", name, k, id, pos[id], p)
		}
		last[k] = pos[id]
	}
}
