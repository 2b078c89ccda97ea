package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// orderChecker is a Publisher shared by several relays. It fails some
// publishes (always for poison events, at random for the others) and records
// every attempt in one global order, flagging at once any event or ordering
// key that is in two publishes at the same time.
type orderChecker struct {
	mu         sync.Mutex
	rnd        *rand.Rand
	inflight   map[string]bool // ordering keys and event IDs being published
	attempts   []attempt
	violations []string
}

type attempt struct {
	id  outbox.ID
	key string
	n   int // the Message's Attempt
	ok  bool
}

func (c *orderChecker) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	c.mu.Lock()
	var held []string
	for i, m := range msgs {
		for _, k := range []string{"id:" + m.ID.String(), "key:" + m.OrderingKey} {
			if k == "key:" {
				continue
			}
			if c.inflight[k] {
				c.violations = append(c.violations, fmt.Sprintf("%s is in two publishes at once (event %s, attempt %d)", k, m.ID, m.Attempt))
			}
			c.inflight[k] = true
			held = append(held, k)
		}
		ok := m.Metadata["poison"] == "" && c.rnd.IntN(100) >= 15
		if !ok {
			errs[i] = fmt.Errorf("refused attempt %d", m.Attempt)
		}
		c.attempts = append(c.attempts, attempt{id: m.ID, key: m.OrderingKey, n: m.Attempt, ok: ok})
	}
	c.mu.Unlock()
	// Widen the window in which another relay could wrongly publish the same
	// key; only the interleavings change, nothing is timed.
	time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	c.mu.Lock()
	for _, k := range held {
		delete(c.inflight, k)
	}
	c.mu.Unlock()
	return errs
}

// Four relays publish events that concurrent transactions emit over a dozen
// ordering keys, while publishes fail at random and poison events go DEAD.
// No event or key is ever in two publishes at once; every event is published
// exactly once or DEAD after its budget; and an event of a key is attempted
// only after every earlier event of its key (in emit order) was published or
// went DEAD.
func TestConcurrentRelaysKeepOrderAndExclusivity(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	emitPool := poolOn(t, dsn)
	const (
		relays      = 4
		emitters    = 4
		txPerEmit   = 25
		maxAttempts = 3
	)
	checker := &orderChecker{rnd: rand.New(rand.NewPCG(1, 2)), inflight: map[string]bool{}}
	cfg := outbox.RelayConfig{BatchSize: 8, PollInterval: 20 * time.Millisecond, MaxAttempts: maxAttempts,
		Backoff: func(int) time.Duration { return 5 * time.Millisecond }, Logger: quiet}
	var started []*outbox.Relay
	for range relays {
		r := newRelay(t, poolOn(t, dsn), checker, cfg)
		is.NoErr(r.Start(ctx))
		started = append(started, r)
	}

	var wg sync.WaitGroup
	var emitMu sync.Mutex
	poison := map[outbox.ID]bool{}
	total := 0
	for e := range emitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(e), 7))
			for n := range txPerEmit {
				// A transaction emitting for several keys takes their locks
				// in emit order: sorted keys cannot deadlock.
				var evs []outbox.Event
				for i := range 1 + rnd.IntN(4) {
					ev := event("", n*10+i)
					if k := rnd.IntN(14); k < 12 {
						ev.OrderingKey = fmt.Sprintf("key-%02d", k)
					}
					if rnd.IntN(40) == 0 {
						ev.Metadata = map[string]string{"poison": "1"}
					}
					evs = append(evs, ev)
				}
				slices.SortStableFunc(evs, func(a, b outbox.Event) int { return strings.Compare(a.OrderingKey, b.OrderingKey) })
				var ids []outbox.ID
				err := pgx.BeginFunc(ctx, emitPool, func(tx pgx.Tx) error {
					ids = ids[:0]
					for _, ev := range evs {
						id, err := outbox.Emit(ctx, tx, ev)
						if err != nil {
							return err
						}
						ids = append(ids, id)
					}
					return nil
				})
				emitMu.Lock()
				for i, id := range ids {
					total++
					poison[id] = evs[i].Metadata["poison"] != ""
				}
				emitMu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testkit.Eventually(t, time.Minute, func() bool {
		return count(t, emitPool, "status IN ('PENDING', 'PUBLISHING')") == 0
	}, "every event to be PUBLISHED or DEAD")
	for _, r := range started {
		is.NoErr(r.Stop(ctx))
	}
	checkOrder(t, emitPool, checker, poison, total, maxAttempts, relays)
}

// checkOrder checks what relays published, as checker recorded it, against
// the stored events: no key or event in two publishes at once, each event
// PUBLISHED once or DEAD after maxAttempts, and per key every attempt after
// the earlier events (in seq order) were published or went DEAD.
func checkOrder(t *testing.T, emitPool pgxPool, checker *orderChecker, poison map[outbox.ID]bool, total, maxAttempts, relays int) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	checker.mu.Lock()
	defer checker.mu.Unlock()
	for _, v := range checker.violations {
		t.Error(v)
	}
	// Emit order and final state from the database.
	rows, err := emitPool.Query(ctx, "SELECT id, ordering_key, seq, status, attempts FROM pginbox_outbox ORDER BY seq")
	is.NoErr(err)
	type final struct {
		key      string
		seq      int64
		status   string
		attempts int
	}
	finals := map[outbox.ID]final{}
	var order []outbox.ID
	for rows.Next() {
		var id outbox.ID
		var f final
		is.NoErr(rows.Scan(&id, &f.key, &f.seq, &f.status, &f.attempts))
		finals[id] = f
		order = append(order, id)
	}
	is.NoErr(rows.Err())
	is.Equal(len(finals), total)

	// When each event finished: its successful attempt, or its last one.
	finishedAt := map[outbox.ID]int{}
	successes := map[outbox.ID]int{}
	tries := map[outbox.ID]int{}
	for pos, a := range checker.attempts {
		tries[a.id]++
		if a.ok {
			successes[a.id]++
			finishedAt[a.id] = pos
		} else if a.n == maxAttempts {
			finishedAt[a.id] = pos
		}
	}
	dead := 0
	for id, f := range finals {
		switch {
		case poison[id]:
			dead++
			if f.status != "DEAD" || tries[id] != maxAttempts || successes[id] != 0 {
				t.Errorf("poison event %s: %s after %d attempts (%d publishes); want DEAD after %d", id, f.status, tries[id], successes[id], maxAttempts)
			}
		case f.status == "DEAD":
			// A healthy event may fail its whole budget at random; then it is
			// DEAD like a poison one.
			dead++
			if tries[id] != maxAttempts || successes[id] != 0 {
				t.Errorf("event %s DEAD after %d attempts with %d successes", id, tries[id], successes[id])
			}
		case f.status != "PUBLISHED" || successes[id] != 1:
			t.Errorf("event %s: %s, published %d times; want PUBLISHED once", id, f.status, successes[id])
		}
	}
	// Per key: an attempt comes after every earlier event of the key finished.
	earlier := map[string][]outbox.ID{}
	lastOf := map[outbox.ID][]outbox.ID{} // the earlier events of each event's key
	for _, id := range order {
		f := finals[id]
		if f.key == "" {
			continue
		}
		lastOf[id] = append([]outbox.ID(nil), earlier[f.key]...)
		earlier[f.key] = append(earlier[f.key], id)
	}
	broken := 0
	for pos, a := range checker.attempts {
		for _, prev := range lastOf[a.id] {
			if at, ok := finishedAt[prev]; !ok || at > pos {
				broken++
				if broken <= 5 {
					t.Errorf("key %s: event %s (seq %d) attempted before the earlier %s (seq %d) was published or DEAD",
						a.key, a.id, finals[a.id].seq, prev, finals[prev].seq)
				}
			}
		}
	}
	t.Logf("%d events over %d relays: %d publish attempts, %d DEAD, %d ordering violations, %d exclusivity violations",
		total, relays, len(checker.attempts), dead, broken, len(checker.violations))
}
