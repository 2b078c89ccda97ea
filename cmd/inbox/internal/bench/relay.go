package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
)

// relayKeys is how many ordering keys the seeded events spread over: a
// claim of 100 takes one event of each, so publishing is one round.
const relayKeys = 100

// relayBatch is the relay's BatchSize and the raw loop's claim size.
const relayBatch = 100

// relay measures relays publishing a backlog of outbox events into an inbox
// on the same database through the in-process publisher (one AcceptBatch
// per claimed batch), against raw loops issuing the same claim, multi-row
// receipt insert and mark statements.
func (s *suite) relay(ctx context.Context) *Result {
	n, relays := s.o.RelayEvents, s.o.Relays
	r := &Result{
		Scenario: ScenarioRelay,
		Description: fmt.Sprintf("%d relays publish a backlog of %s outbox events (%d ordering keys) into an inbox through outbox.InboxPublisher, %d per claim",
			relays, thousands(n), relayKeys, relayBatch),
		Concurrency: relays, Rounds: s.o.Rounds,
		Target: ">= 0.70 x raw claim / insert / mark loop", OK: true, Failures: []string{},
	}
	var pg, raw sample
	for round := range s.o.Rounds {
		order := []string{"pginbox", "raw"}
		if round%2 == 1 {
			order = []string{"raw", "pginbox"}
		}
		for _, side := range order {
			if err := s.reset(ctx, 0); err != nil {
				r.failf("%v", err)
				return r
			}
			events, err := s.seedOutbox(ctx, n)
			if err == nil {
				err = s.checkpoint(ctx)
			}
			if err != nil {
				r.failf("%v", err)
				return r
			}
			label := fmt.Sprintf("%s %s round %d/%d", ScenarioRelay, side, round+1, s.o.Rounds)
			var got sample
			if side == "pginbox" {
				got, err = s.pginboxRelay(ctx, label, n, relays)
			} else {
				got, err = s.rawRelay(ctx, label, events, relays)
			}
			if err != nil {
				r.failf("%s: %v", side, err)
				return r
			}
			var published, receipts int
			if err := s.admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM pginbox_outbox WHERE status = 'PUBLISHED'),
				(SELECT count(*) FROM pginbox_receipts)`).Scan(&published, &receipts); err != nil {
				r.failf("%v", err)
				return r
			}
			if published != n || receipts != n {
				r.failf("%s: %d of %d events PUBLISHED, %d receipts; want %d and %d", side, published, n, receipts, n, n)
			}
			if side == "pginbox" {
				pg.add(got)
				r.Counts.Accepted += receipts
				r.Counts.ReceiptsInDB = receipts
			} else {
				raw.add(got)
				r.Counts.RawAccepted += receipts
			}
		}
	}
	s.finish(r, pg, raw, fmt.Sprintf("per batch of %d: the relay's claim statement, the multi-row receipt insert, the fenced mark, from %d plain pgx loops", relayBatch, relays))
	r.MeetsTarget = r.Ratio >= 0.7
	r.Verified = fmt.Sprintf("%s events: every one PUBLISHED and accepted once (%s receipts), %d errors; raw: %s receipts",
		thousands(pg.calls), thousands(r.Counts.Accepted), r.Errors, thousands(r.Counts.RawAccepted))
	return r
}

// seededEvent is what the raw loop needs of an event, computed before the
// clock starts: its receipt's message ID and fingerprint.
type seededEvent struct {
	messageID   string
	fingerprint []byte
}

// seedOutbox inserts n PENDING events addressed to the bench consumer.
func (s *suite) seedOutbox(ctx context.Context, n int) (map[[16]byte]seededEvent, error) {
	events := make(map[[16]byte]seededEvent, n)
	rows := make([][]any, n)
	for i := range n {
		id := inboxtype.New()
		p := payloadFor(i)
		fp := inbox.Fingerprint(benchEventType, 1, []byte(p))
		events[id] = seededEvent{messageID: id.String(), fingerprint: fp[:]}
		rows[i] = []any{id, benchSource, benchConsumer, fmt.Sprintf("k-%03d", i%relayKeys), benchEventType, int32(1), p, "{}"}
	}
	_, err := s.admin.CopyFrom(ctx, pgx.Identifier{"pginbox_outbox"},
		[]string{"id", "source", "destination", "ordering_key", "event_type", "schema_version", "payload", "metadata"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return nil, fmt.Errorf("bench: seeding %d outbox events: %w", n, err)
	}
	return events, nil
}

// pginboxRelay runs relays (Drain, the relay loop's batches without the
// waiting) until every event is published. A relay has no per-event call to
// time from outside, so this phase has a rate but no latencies.
func (s *suite) pginboxRelay(ctx context.Context, label string, n, relays int) (sample, error) {
	target, err := newPool(ctx, s.base, relays)
	if err != nil {
		return sample{}, err
	}
	defer target.Close()
	client, err := inbox.NewClient(target, inbox.Config{Logger: discardLogger})
	if err != nil {
		return sample{}, err
	}
	defer client.Close()
	var drains []func(context.Context) (int, error)
	for range relays {
		pool, err := newPool(ctx, s.base, 2)
		if err != nil {
			return sample{}, err
		}
		defer pool.Close()
		r, err := outbox.NewRelay(pool, outbox.InboxPublisher{Client: client},
			outbox.RelayConfig{BatchSize: relayBatch, PollOnly: true, Logger: discardLogger})
		if err != nil {
			return sample{}, err
		}
		drains = append(drains, r.Drain)
	}
	return s.publishLoops(ctx, label, n, drains), nil
}

// rawRelay runs loops of claim, receipt insert and mark until nothing is
// left to claim.
func (s *suite) rawRelay(ctx context.Context, label string, events map[[16]byte]seededEvent, relays int) (sample, error) {
	pool, err := newPool(ctx, s.base, relays)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	loops := make([]func(context.Context) (int, error), relays)
	for i := range loops {
		loops[i] = func(ctx context.Context) (int, error) { return rawRelayBatch(ctx, pool, events) }
	}
	return s.publishLoops(ctx, label, len(events), loops), nil
}

// publishLoops runs each step function in a goroutine of its own until n
// events were published (a step returns how many it published) or a step
// fails, and times it all.
func (s *suite) publishLoops(ctx context.Context, label string, n int, steps []func(context.Context) (int, error)) sample {
	var published atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(steps))
	stop := s.prog.phase(label, n, func() int { return int(published.Load()) })
	start := time.Now()
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && int(published.Load()) < n {
				k, err := step(ctx)
				published.Add(int64(k))
				if err != nil {
					errs[i] = err
					return
				}
				if k == 0 { // the other loops hold the rest
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	got := sample{calls: int(published.Load()), elapsed: elapsed}
	if err := errors.Join(errs...); err != nil {
		got.errors, got.firstErr = 1, err
	}
	return got
}

// rawRelayBatch claims one batch, inserts its receipts and marks it.
func rawRelayBatch(ctx context.Context, pool *pgxpool.Pool, events map[[16]byte]seededEvent) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, rawClaimSQL, int64(time.Minute/time.Millisecond), int32(relayBatch))
	if err != nil {
		return 0, err
	}
	var a rawBatchArgs
	var ids, tokens []string
	for rows.Next() {
		var id, token [16]byte
		var payload string
		if err := rows.Scan(&id, &token, &payload); err != nil {
			rows.Close()
			return 0, err
		}
		ev := events[id]
		ids, tokens = append(ids, uuidText(id)), append(tokens, uuidText(token))
		a.ids = append(a.ids, uuidText(newID()))
		a.kinds = append(a.kinds, "global")
		a.scopes = append(a.scopes, "")
		a.sources = append(a.sources, benchSource)
		a.consumers = append(a.consumers, benchConsumer)
		a.messageIDs = append(a.messageIDs, ev.messageID)
		a.eventTypes = append(a.eventTypes, benchEventType)
		a.versions = append(a.versions, 1)
		a.fingerprints = append(a.fingerprints, ev.fingerprint)
		a.payloads = append(a.payloads, payload)
		a.metadata = append(a.metadata, "{}")
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	inserted, err := pool.Query(ctx, rawBatchSQL, a.ids, a.kinds, a.scopes, a.sources, a.consumers,
		a.messageIDs, a.eventTypes, a.versions, a.fingerprints, a.payloads, a.metadata, int32(10))
	if err != nil {
		return 0, err
	}
	inserted.Close()
	if err := inserted.Err(); err != nil {
		return 0, err
	}
	marked, err := pool.Query(ctx, rawMarkSQL, ids, tokens)
	if err != nil {
		return 0, err
	}
	n := 0
	for marked.Next() {
		n++
	}
	if err := marked.Err(); err != nil {
		return 0, err
	}
	if n != len(ids) {
		return n, fmt.Errorf("marked %d of %d claimed events", n, len(ids))
	}
	return n, nil
}
