package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// retainedDB is one of the two tables retained-1m compares.
type retainedDB struct {
	s        *suite
	retained int
	what     string
	prepare  func(ctx context.Context) error // before a phase
	tidy     func(ctx context.Context) error // after a phase
	pg, raw  sample
	claims   []time.Duration
}

// retained1M compares accept latency and claim latency on an empty table with
// the same on a table holding RetainedRows COMPLETED receipts: claims and
// accepts must not slow down as history grows (partial indexes).
//
// When it may create a second database on the server, the two tables live side
// by side and their phases alternate, so disk-latency drift hits both alike.
// Otherwise it measures the empty table first, then seeds the same one.
func (s *suite) retained1M(ctx context.Context) *Result {
	rows := s.o.RetainedRows
	sp := acceptSpec{name: ScenarioRetained1M, workers: s.o.Concurrency, calls: s.o.Calls}
	r := &Result{
		Scenario: ScenarioRetained1M,
		Description: fmt.Sprintf("Accept (%d callers) and claim (batches of 10, one claimer) with %s COMPLETED receipts vs an empty table",
			sp.workers, thousands(rows)),
		Concurrency: sp.workers, Rounds: s.o.Rounds,
		Target: "accept p95 and claim latency with the retained rows <= 1.2 x empty table",
		OK:     true, Failures: []string{},
	}

	empty := &retainedDB{s: s, what: "empty table",
		prepare: func(ctx context.Context) error { return s.reset(ctx, 0) },
		tidy:    func(context.Context) error { return nil },
	}
	fs, why := s.sibling(ctx, "_pginbox_bench_1m")
	sideBySide := fs != nil
	if !sideBySide {
		fs = s
		r.Description += " (measured one after the other: " + why + ")"
	} else {
		defer fs.dropSibling(ctx, s)
	}
	full := &retainedDB{s: fs, retained: rows, what: thousands(rows) + " retained",
		prepare: func(context.Context) error { return nil },
		tidy: func(ctx context.Context) error {
			// Remove what the phase added, so the next one meets the same table.
			if _, err := fs.admin.Exec(ctx, "TRUNCATE pginbox_work; DELETE FROM pginbox_receipts WHERE message_id NOT LIKE 'hist-%'"); err != nil {
				return fmt.Errorf("bench: tidying: %w", err)
			}
			if _, err := fs.admin.Exec(ctx, "VACUUM pginbox_receipts"); err != nil {
				return fmt.Errorf("bench: vacuum: %w", err)
			}
			return fs.checkpoint(ctx)
		},
	}

	seed := func() error {
		if err := fs.reset(ctx, 0); err != nil {
			return err
		}
		return fs.seedHistory(ctx, rows)
	}
	var err error
	if sideBySide {
		if err = seed(); err == nil {
			err = s.retainedRounds(ctx, r, sp, empty, full)
		}
	} else {
		if err = s.retainedRounds(ctx, r, sp, empty); err == nil {
			if err = seed(); err == nil {
				err = s.retainedRounds(ctx, r, sp, full)
			}
		}
	}
	if err != nil {
		r.failf("%v", err)
		return r
	}

	s.finish(r, full.pg, full.raw, fmt.Sprintf("the accept statement from a plain pgx loop, same callers, %s retained", thousands(rows)))
	em := empty.pg.measure("")
	slices.Sort(empty.claims)
	slices.Sort(full.claims)
	claimEmpty, claimFull := ms(percentile(empty.claims, 50)), ms(percentile(full.claims, 50))
	r.Extra = map[string]float64{
		"retained_rows":            float64(rows),
		"empty_calls_per_sec":      round2(em.CallsPerSec),
		"empty_raw_calls_per_sec":  round2(empty.raw.measure("").CallsPerSec),
		"empty_p95_ms":             em.P95Ms,
		"retained_p95_ms":          r.P95Ms,
		"accept_p95_ratio":         ratio(r.P95Ms, em.P95Ms),
		"claim_p50_empty_ms":       claimEmpty,
		"claim_p50_retained_ms":    claimFull,
		"claim_p95_empty_ms":       ms(percentile(empty.claims, 95)),
		"claim_p95_retained_ms":    ms(percentile(full.claims, 95)),
		"claim_ratio":              ratio(claimFull, claimEmpty),
		"claims_measured_per_side": float64(len(full.claims)),
	}
	r.MeetsTarget = r.Extra["accept_p95_ratio"] <= 1.2 && r.Extra["claim_ratio"] <= 1.2
	r.Verified = fmt.Sprintf("%s calls on the empty table and %s with %s retained: %s accepted, claims took exactly the pending receipts, %d errors",
		thousands(empty.pg.calls), thousands(full.pg.calls), thousands(rows), thousands(r.Counts.Accepted), r.Errors+em.Errors)
	return r
}

// retainedRounds runs the rounds over dbs: pginbox on each, then raw on each in
// reverse, the whole order reversed every other round.
func (s *suite) retainedRounds(ctx context.Context, r *Result, sp acceptSpec, dbs ...*retainedDB) error {
	type step struct {
		d    *retainedDB
		side string
	}
	var steps []step
	for _, d := range dbs {
		steps = append(steps, step{d, "pginbox"})
	}
	for _, d := range slices.Backward(dbs) {
		steps = append(steps, step{d, "raw"})
	}
	for round := range s.o.Rounds {
		order := slices.Clone(steps)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, st := range order {
			if err := s.retainedPhase(ctx, r, sp, st.d, st.side, round); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *suite) retainedPhase(ctx context.Context, r *Result, sp acceptSpec, d *retainedDB, side string, round int) error {
	if err := d.prepare(ctx); err != nil {
		return err
	}
	label := fmt.Sprintf("%s %s %s round %d/%d", ScenarioRetained1M, d.what, side, round+1, s.o.Rounds)
	var oc outcomeCounts
	var got sample
	var err error
	if side == "pginbox" {
		got, err = d.s.pginboxAccept(ctx, sp, label, side, round, &oc, "")
	} else {
		got, err = d.s.rawAccept(ctx, sp, label, round, rawAcceptSQL, &oc, "")
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", d.what, side, err)
	}
	if int(oc.accepted.Load()) != got.calls {
		r.failf("%s %s: %d calls gave %d accepted", d.what, side, got.calls, oc.accepted.Load())
	}
	c, err := d.s.counts(ctx)
	if err != nil {
		return err
	}
	if c.receipts != d.retained+got.calls || c.pending != got.calls {
		r.failf("%s %s: the database holds %d receipts (%d pending), want %d (%d pending)",
			d.what, side, c.receipts, c.pending, d.retained+got.calls, got.calls)
	}
	if side == "pginbox" {
		d.pg.add(got)
		r.Counts.Accepted += got.calls
		r.Counts.ReceiptsInDB = c.receipts
		lat, err := d.s.claimAll(ctx, got.calls)
		if err != nil {
			return err
		}
		d.claims = append(d.claims, lat...)
	} else {
		d.raw.add(got)
		r.Counts.RawAccepted += got.calls
	}
	return d.tidy(ctx)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round2(a / b)
}

// claimAll claims the pending receipts ten at a time with pginbox's claim
// statement from one caller, timing the statement alone. Each claim runs in a
// transaction with synchronous_commit off: the WAL flush of its commit costs
// the same whatever the table holds, and on a cloud disk its noise would drown
// what this compares, the query's cost.
func (s *suite) claimAll(ctx context.Context, want int) ([]time.Duration, error) {
	var lat []time.Duration
	total := 0
	for {
		var n int
		var d time.Duration
		err := pgx.BeginTxFunc(ctx, s.admin, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
			t0 := time.Now()
			rows, err := db.New(tx).ReceiptClaim(ctx, db.ReceiptClaimParams{ClaimToken: inboxtype.New(), LeaseMs: 30_000, Consumers: []string{benchConsumer}, MaxCount: 10, MaxWalk: 1, MaxScopes: 1})
			d, n = time.Since(t0), len(rows)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("bench: claim: %w", err)
		}
		if n == 0 {
			break
		}
		lat = append(lat, d)
		total += n
	}
	if total != want {
		return nil, fmt.Errorf("bench: claims took %d receipts, want %d", total, want)
	}
	return lat, nil
}

// seedHistory inserts rows COMPLETED receipts with one INSERT ... SELECT
// generate_series, then vacuums, analyzes and checkpoints.
func (s *suite) seedHistory(ctx context.Context, rows int) error {
	var seeded atomic.Int64 // one statement: nothing to show until it is done
	stop := s.prog.phase(fmt.Sprintf("%s seeding %s COMPLETED receipts", ScenarioRetained1M, thousands(rows)), rows, func() int { return int(seeded.Load()) })
	defer stop()
	defer func() { seeded.Store(int64(rows)) }()
	_, err := s.admin.Exec(ctx, `
		INSERT INTO pginbox_receipts (
		    id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version,
		    fingerprint, payload, metadata, status, attempts, max_attempts,
		    created_at, updated_at, completed_at)
		SELECT lpad(to_hex(i), 32, '0')::uuid, 'tenant', $1, $2, $3, 'hist-' || i, $4, 1,
		    sha256(('hist-' || i)::bytea), $5::jsonb, '{}', 'COMPLETED', 1, 10,
		    now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
		FROM generate_series(1, $6::int) AS i`,
		benchTenant, benchSource, benchConsumer, benchEventType, payloadFor(0), rows)
	if err != nil {
		return fmt.Errorf("bench: seeding %d receipts: %w", rows, err)
	}
	if _, err := s.admin.Exec(ctx, "VACUUM ANALYZE pginbox_receipts"); err != nil {
		return fmt.Errorf("bench: vacuum: %w", err)
	}
	return s.checkpoint(ctx)
}

// sibling creates, migrates and opens a second database on the same server,
// named after the first with suffix. It returns nil and the reason when the
// server does not allow it.
func (s *suite) sibling(ctx context.Context, suffix string) (*suite, string) {
	name := s.base.ConnConfig.Database + suffix
	if len(name) > 63 {
		name = "pginbox_bench" + suffix
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident); err != nil {
		return nil, fmt.Sprintf("could not create a second database: %v", err)
	}
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return nil, fmt.Sprintf("could not create a second database: %v", err)
	}
	cfg := s.base.Copy()
	cfg.ConnConfig.Database = name
	fail := func(err error) (*suite, string) {
		s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident)
		return nil, fmt.Sprintf("could not prepare a second database: %v", err)
	}
	if err := migrate(ctx, cfg); err != nil {
		return fail(err)
	}
	fs, err := newSuite(ctx, s.o, cfg, s.prog)
	if err != nil {
		return fail(err)
	}
	return fs, ""
}

// dropSibling closes and drops a database made by sibling.
func (s *suite) dropSibling(ctx context.Context, parent *suite) {
	s.close()
	ident := pgx.Identifier{s.base.ConnConfig.Database}.Sanitize()
	if _, err := parent.admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+ident); err != nil {
		parent.prog.note("bench: dropping %s: %v", ident, err)
	}
}
