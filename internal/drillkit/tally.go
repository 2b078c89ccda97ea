package drillkit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier reads (a connection or a pool).
type Querier interface {
	// Query is pgx's Query.
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	// QueryRow is pgx's QueryRow.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Tally compares the acknowledged accepts with what the database holds.
type Tally struct {
	Acked     int // accepts acknowledged (Accepted or Duplicate)
	Found     int // acknowledged messages stored as receipts
	Missing   int // acknowledged messages without a receipt
	Unapplied int // acknowledged messages stored, without a business row
	Doubled   int // messages with more than one business row
	// Torn counts completions and business rows that did not commit
	// together: a business row whose receipt is not COMPLETED, or a
	// COMPLETED receipt without one.
	Torn     int
	Receipts int            // receipts stored, acknowledged or not
	Statuses map[string]int // receipts per status
}

// Lost is what an acknowledged accept can lose: its receipt, or its effect.
func (t Tally) Lost() int { return t.Missing + t.Unapplied }

// Count reads the database against acked, the message IDs whose accept was
// acknowledged.
func Count(ctx context.Context, db Querier, acked []string) (Tally, error) {
	return count(ctx, db, acked, `
		SELECT r.message_id, r.status, coalesce(e.n, 0)
		FROM pginbox_receipts_live r
		LEFT JOIN (SELECT message_id, count(*) AS n FROM drill_effects GROUP BY message_id) e USING (message_id)`,
		`SELECT count(*) FROM drill_effects e
		WHERE NOT EXISTS (SELECT 1 FROM pginbox_receipts r WHERE r.message_id = e.message_id)`)
}

// CountCitus is Count on Citus, with the business table of
// CreateCitusEffects: every join carries the tenant (the distribution
// column), so each runs shard by shard.
func CountCitus(ctx context.Context, db Querier, acked []string) (Tally, error) {
	return count(ctx, db, acked, `
		SELECT r.message_id, r.status, coalesce(e.n, 0)
		FROM pginbox_receipts_live r
		LEFT JOIN (SELECT scope_id, message_id, count(*) AS n FROM drill_effects GROUP BY scope_id, message_id) e
		  ON e.scope_id = r.scope_id AND e.message_id = r.message_id`,
		`SELECT count(*) FROM drill_effects e
		LEFT JOIN pginbox_receipts r ON r.scope_id = e.scope_id AND r.message_id = e.message_id
		WHERE r.id IS NULL`)
}

func count(ctx context.Context, db Querier, acked []string, tallySQL, orphanSQL string) (Tally, error) {
	t := Tally{Acked: len(acked), Statuses: map[string]int{}}
	rows, err := db.Query(ctx, tallySQL)
	if err != nil {
		return t, fmt.Errorf("drillkit: tally: %w", err)
	}
	type stored struct {
		status  string
		effects int
	}
	byID := map[string]stored{}
	for rows.Next() {
		var id string
		var s stored
		if err := rows.Scan(&id, &s.status, &s.effects); err != nil {
			return t, fmt.Errorf("drillkit: tally: %w", err)
		}
		byID[id] = s
		t.Receipts++
		t.Statuses[s.status]++
		switch {
		case s.effects > 1:
			t.Doubled++
		case (s.effects == 1) != (s.status == "COMPLETED"):
			t.Torn++
		}
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("drillkit: tally: %w", err)
	}
	var orphans int
	err = db.QueryRow(ctx, orphanSQL).Scan(&orphans)
	if err != nil {
		return t, fmt.Errorf("drillkit: tally: %w", err)
	}
	t.Torn += orphans
	for _, id := range acked {
		s, ok := byID[id]
		switch {
		case !ok:
			t.Missing++
		case s.effects == 0:
			t.Found++
			t.Unapplied++
		default:
			t.Found++
		}
	}
	return t, nil
}

// Line is a drill's one-line summary.
func (t Tally) Line(drill string, operations int, recovery time.Duration, more ...string) string {
	var st []string
	for _, k := range slices.Sorted(maps.Keys(t.Statuses)) {
		st = append(st, fmt.Sprintf("%s=%d", k, t.Statuses[k]))
	}
	line := fmt.Sprintf("drill %s: operations=%d acknowledged=%d found=%d lost=%d doubled=%d torn=%d recovery=%s receipts=%d (%s)",
		drill, operations, t.Acked, t.Found, t.Lost(), t.Doubled, t.Torn, recovery.Round(time.Millisecond), t.Receipts, strings.Join(st, " "))
	if len(more) > 0 {
		line += " " + strings.Join(more, " ")
	}
	return line
}

// Settled reports whether no receipt waits for the worker: none PENDING,
// RETRYABLE or PROCESSING.
func Settled(ctx context.Context, db Querier) (bool, error) {
	var n int
	err := db.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status IN ('PENDING', 'RETRYABLE', 'PROCESSING')").Scan(&n)
	if err != nil {
		return false, fmt.Errorf("drillkit: %w", err)
	}
	return n == 0, nil
}
