package bench

import (
	"context"
	"fmt"
)

// tableStats are the cumulative row counters of the receipts table and of the
// work table beside it: what a phase wrote, read after the phase's
// connections closed (a backend flushes its statistics when it exits).
type tableStats struct {
	inserts, updates, hotUpdates, deletes, dead int64
	work                                        *tableStats
}

func (t *tableStats) add(o tableStats) {
	t.inserts += o.inserts
	t.updates += o.updates
	t.hotUpdates += o.hotUpdates
	t.deletes += o.deletes
	t.dead += o.dead
	if o.work != nil {
		if t.work == nil {
			t.work = &tableStats{}
		}
		t.work.add(*o.work)
	}
}

// withoutInserts leaves out the rows a phase's seeding or feeder inserted:
// the figures are what processing wrote.
func (t tableStats) withoutInserts() tableStats {
	t.inserts = 0
	if t.work != nil {
		w := t.work.withoutInserts()
		t.work = &w
	}
	return t
}

// receiptStats reads the counters of pginbox_receipts and pginbox_work.
func (s *suite) receiptStats(ctx context.Context) (tableStats, error) {
	read := func(rel string) (tableStats, error) {
		var t tableStats
		err := s.admin.QueryRow(ctx, `SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup
			FROM pg_stat_user_tables WHERE relname = $1`, rel).
			Scan(&t.inserts, &t.updates, &t.hotUpdates, &t.deletes, &t.dead)
		if err != nil {
			return t, fmt.Errorf("bench: reading table statistics of %s: %w", rel, err)
		}
		return t, nil
	}
	t, err := read("pginbox_receipts")
	if err != nil {
		return t, err
	}
	w, err := read("pginbox_work")
	t.work = &w
	return t, err
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
	if w := t.work; w != nil {
		r.setExtra("work_row_versions_per_msg", per(w.inserts+w.updates+w.deletes))
		r.setExtra("work_dead_tuples_per_1k", round2(float64(w.dead)*1000/float64(messages)))
	}
}

func (r *Result) setExtra(k string, v float64) {
	if r.Extra == nil {
		r.Extra = map[string]float64{}
	}
	r.Extra[k] = v
}
