package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/pginbox/pginbox/inbox"
)

// The ordered scenario's keys: many keys (each with a few receipts), and a
// few hot keys (each with many), over the same backlog.
const (
	orderedKeys    = 1_000
	orderedHotKeys = 10
)

// ordered measures the drain of a backlog whose receipts carry ordering keys
// against the same backlog without keys, in the same run: with many keys
// (orderedKeys, one receipt at a time per key) the keys should cost little;
// with orderedHotKeys keys at most that many handlers can run at once, so
// the keys bound the rate. Each handler inserts one business row, as in
// drain; Concurrency is the largest --drain-concurrency, MessagesPerTx 1.
func (s *suite) ordered(ctx context.Context) *Result {
	n := s.o.OrderedMessages
	concurrency := slices.Max(s.o.DrainConcurrency)
	keys := min(orderedKeys, n)
	hot := min(orderedHotKeys, n)
	r := &Result{
		Scenario: "ordered",
		Description: fmt.Sprintf("Worker (Concurrency %d) drains a backlog of %s receipts with ordering keys: %s keys of %d receipts, then %d hot keys; each handler inserts one business row",
			concurrency, thousands(n), thousands(keys), n/keys, hot),
		Concurrency: concurrency, Rounds: s.o.Rounds, OK: true, Failures: []string{},
		Target: fmt.Sprintf(">= 0.80 x the same backlog without keys (%s keys); %d hot keys: bounded by the keys", thousands(keys), hot),
		Raw:    Measure{Description: "the same backlog and worker without ordering keys, in the same run"},
	}
	var unordered, many, few sample
	for round := range s.o.Rounds {
		sides := []int{0, keys, hot}
		if round%2 == 1 {
			slices.Reverse(sides)
		}
		for _, k := range sides {
			if err := s.reset(ctx, 0); err != nil {
				r.failf("%v", err)
				return r
			}
			_, err := s.seed(ctx, "ordered", n, inbox.StatusPending)
			if err == nil && k > 0 {
				err = s.orderBacklog(ctx, k)
			}
			if err == nil {
				err = s.analyze(ctx)
			}
			if err == nil {
				err = s.checkpoint(ctx)
			}
			if err != nil {
				r.failf("%v", err)
				return r
			}
			label := fmt.Sprintf("ordered %d keys round %d/%d", k, round+1, s.o.Rounds)
			got, err := s.pginboxDrain(ctx, label, n, concurrency, 1, nil, false, fmt.Sprintf("ordered-%dkeys-round%d", k, round+1))
			if err != nil {
				r.failf("%d keys: %v", k, err)
				return r
			}
			c, err := s.counts(ctx)
			if err != nil {
				r.failf("%v", err)
				return r
			}
			if c.completed != n || c.effects != n {
				r.failf("%d keys: %d COMPLETED and %d business rows, want %d", k, c.completed, c.effects, n)
			}
			violations, err := s.orderViolations(ctx)
			if err != nil {
				r.failf("%v", err)
				return r
			}
			if violations > 0 {
				r.failf("%d keys: %d receipts completed before an earlier receipt of their key", k, violations)
			}
			switch k {
			case 0:
				unordered.add(got)
			case keys:
				many.add(got)
			default:
				few.add(got)
			}
			r.Counts.BusinessRows += c.effects
		}
	}
	s.finish(r, many, unordered, r.Raw.Description)
	m := few.measure("")
	r.setExtra("hot_keys", float64(hot))
	r.setExtra("hot_keys_per_sec", round2(m.CallsPerSec))
	if r.Raw.CallsPerSec > 0 {
		r.setExtra("ratio_hot_keys", round2(m.CallsPerSec/r.Raw.CallsPerSec))
	}
	r.MeetsTarget = r.Ratio >= 0.8
	r.Verified = fmt.Sprintf("%s receipts drained with and without keys, every receipt COMPLETED once with its business row; no receipt completed before an earlier one of its key",
		thousands(r.Counts.BusinessRows))
	return r
}

// orderBacklog gives the seeded backlog ordering keys, round robin over k
// keys in message order, with their sequence numbers; each key's first
// receipt is due, the others wait behind it (BLOCKED), as accepts leave them.
func (s *suite) orderBacklog(ctx context.Context, k int) error {
	_, err := s.admin.Exec(ctx, `
WITH n AS (
    SELECT id, row_number() OVER (ORDER BY message_id) - 1 AS i FROM pginbox_receipts
)
UPDATE pginbox_receipts r SET ordering_key = 'key-' || (n.i % $1), ordering_seq = n.i / $1 + 1
FROM n WHERE r.id = n.id`, k)
	if err == nil {
		_, err = s.admin.Exec(ctx, `
UPDATE pginbox_work w
SET ordering_key = r.ordering_key, ordering_seq = r.ordering_seq,
    status = CASE WHEN r.ordering_seq = 1 THEN 'PENDING' ELSE 'BLOCKED' END
FROM pginbox_receipts r
WHERE r.id = w.receipt_id AND r.scope_kind = w.scope_kind AND r.scope_id = w.scope_id`)
	}
	if err != nil {
		return fmt.Errorf("bench: giving the backlog %d ordering keys: %w", k, err)
	}
	return nil
}

// orderViolations counts receipts that completed before an earlier receipt
// of their key did (completion times are their transactions' start times,
// so one key's receipts, one transaction after another, never tie).
func (s *suite) orderViolations(ctx context.Context) (int, error) {
	var n int
	err := s.admin.QueryRow(ctx, `
SELECT count(*) FROM (
    SELECT completed_at < lag(completed_at) OVER (PARTITION BY ordering_key ORDER BY ordering_seq) AS early
    FROM pginbox_receipts WHERE ordering_key IS NOT NULL
) t WHERE early`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("bench: checking the order: %w", err)
	}
	return n, nil
}
