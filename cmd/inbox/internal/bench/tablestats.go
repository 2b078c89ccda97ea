package bench

import (
	"context"
	"fmt"
)

// tableStats are the cumulative row counters of the receipts table: what a
// phase wrote, read after the phase's connections closed (a backend flushes
// its statistics when it exits).
type tableStats struct {
	inserts, updates, hotUpdates, deletes, dead int64
}

// receiptStats reads the receipts table's counters; ok is false when the role
// cannot reset statistics (then the figures are left out).
func (s *suite) receiptStats(ctx context.Context) (tableStats, error) {
	var t tableStats
	err := s.admin.QueryRow(ctx, `SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup
		FROM pg_stat_user_tables WHERE relname = 'pginbox_receipts'`).
		Scan(&t.inserts, &t.updates, &t.hotUpdates, &t.deletes, &t.dead)
	if err != nil {
		return t, fmt.Errorf("bench: reading table statistics: %w", err)
	}
	return t, nil
}

// resetStats zeroes the database's statistics counters (and pg_stat_statements
// when profiling). Without the privilege it reports false.
func (s *suite) resetStats(ctx context.Context) bool {
	if _, err := s.admin.Exec(ctx, "SELECT pg_stat_reset()"); err != nil {
		return false
	}
	if s.o.ProfileDir != "" {
		s.admin.Exec(ctx, "SELECT pg_stat_statements_reset()")
	}
	return true
}

// rowVersions adds a phase's receipts-table writes, per message, to r.Extra.
func rowVersions(r *Result, t tableStats, messages int) {
	if messages == 0 {
		return
	}
	per := func(v int64) float64 { return round2(float64(v) / float64(messages)) }
	r.setExtra("row_versions_per_msg", per(t.inserts+t.updates+t.deletes))
	r.setExtra("non_hot_updates_per_msg", per(t.updates-t.hotUpdates))
	r.setExtra("dead_tuples_per_1k", round2(float64(t.dead)*1000/float64(messages)))
}

func (r *Result) setExtra(k string, v float64) {
	if r.Extra == nil {
		r.Extra = map[string]float64{}
	}
	r.Extra[k] = v
}
