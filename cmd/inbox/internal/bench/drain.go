package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// drain measures a worker processing a backlog of PENDING receipts, each
// handler doing one business insert in the worker's transaction, against raw
// BEGIN / INSERT business row / UPDATE receipt / COMMIT loops at the same
// concurrency, and (batched) against a raw loop batching the same way.
func (s *suite) drain(ctx context.Context, concurrency, perTx int) *Result {
	n := s.o.DrainMessages
	r := &Result{
		Scenario:    fmt.Sprintf("drain-c%d", concurrency),
		Description: fmt.Sprintf("Worker (Concurrency %d) drains a backlog of %s receipts; each handler inserts one business row in the worker's transaction", concurrency, thousands(n)),
		Concurrency: concurrency, Rounds: s.o.Rounds,
		Target: ">= 0.80 x raw per-transaction ceiling", OK: true, Failures: []string{},
	}
	sides := []string{"pginbox", "raw"}
	if perTx > 1 {
		r.Scenario = fmt.Sprintf("drain-batched-c%d", concurrency)
		r.Description = fmt.Sprintf("Worker (Concurrency %d, MessagesPerTx %d) drains a backlog of %s receipts; each handler inserts one business row, %d messages share a transaction", concurrency, perTx, thousands(n), perTx)
		r.Target = fmt.Sprintf(">= 2 x raw per-transaction ceiling and >= 0.80 x a raw loop batching %d per transaction", perTx)
		sides = append(sides, "raw-batched")
	}
	var pg, raw, rawBatched, hooked, rls sample
	var writes tableStats
	statsOK := true
	for round := range s.o.Rounds {
		order := s.withRLS(s.sides(sides...))
		if round%2 == 1 {
			order = slices.Clone(order)
			slices.Reverse(order)
		}
		for _, side := range order {
			if err := s.reset(ctx, 0); err != nil {
				r.failf("%v", err)
				return r
			}
			ids, err := s.seed(ctx, "backlog", n, inbox.StatusPending)
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
			label := fmt.Sprintf("%s %s round %d/%d", r.Scenario, side, round+1, s.o.Rounds)
			var got sample
			switch side {
			case "pginbox":
				statsOK = statsOK && s.resetStats(ctx)
				got, err = s.pginboxDrain(ctx, label, n, concurrency, perTx, nil, false, fmt.Sprintf("%s-round%d", r.Scenario, round+1))
				if err == nil && statsOK {
					var t tableStats
					if t, err = s.receiptStats(ctx); err == nil {
						writes.add(t.withoutInserts())
					}
				}
			case "raw", "raw-batched":
				rawPerTx := 1
				if side == "raw-batched" {
					rawPerTx = perTx
				}
				// Profiled too: the per-message analysis compares the two
				// sides statement by statement.
				got, err = s.rawDrain(ctx, label, ids, concurrency, rawPerTx, fmt.Sprintf("%s-%s-round%d", r.Scenario, side, round+1))
			case sideHooked:
				got, err = s.pginboxDrain(ctx, label, n, concurrency, perTx, s.hooksFor(side), false, "")
			case sideRLS:
				got, err = s.pginboxDrain(ctx, label, n, concurrency, perTx, nil, true, "")
			}
			if err != nil {
				r.failf("%s: %v", side, err)
				return r
			}
			c, err := s.counts(ctx)
			if err != nil {
				r.failf("%v", err)
				return r
			}
			if c.completed != n || c.effects != n || c.receipts != n {
				r.failf("%s: %d receipts: %d COMPLETED and %d business rows, want %d and %d", side, c.receipts, c.completed, c.effects, n, n)
			}
			switch side {
			case "pginbox":
				pg.add(got)
				r.Counts.BusinessRows += c.effects
				r.Counts.ReceiptsInDB = c.receipts
			case "raw":
				raw.add(got)
				r.Counts.RawBusiness += c.effects
			case sideHooked:
				hooked.add(got)
			case sideRLS:
				rls.add(got)
			default:
				rawBatched.add(got)
			}
		}
	}
	s.finish(r, pg, raw, "BEGIN; INSERT business row; complete the receipt (pginbox's completion statement); COMMIT, per message, from a plain pgx loop")
	if statsOK {
		// Seeding inserted the backlog (its statistics may arrive late):
		// count what draining wrote.
		rowVersions(r, writes, pg.calls)
	}
	s.finishHooked(r, hooked)
	s.finishRLS(r, rls)
	r.MeetsTarget = r.Ratio >= 0.8
	if perTx > 1 {
		m := rawBatched.measure("")
		r.setExtra("raw_batched_per_sec", round2(m.CallsPerSec))
		if m.CallsPerSec > 0 {
			r.setExtra("ratio_raw_batched", round2(r.CallsPerSec/m.CallsPerSec))
		}
		r.MeetsTarget = r.Ratio >= 2 && r.Extra["ratio_raw_batched"] >= 0.8
		if rawBatched.firstErr != nil {
			r.failf("raw batched: %d errors, first: %v", rawBatched.errors, rawBatched.firstErr)
		}
	}
	r.Verified = fmt.Sprintf("%s receipts: %s business effects, every receipt COMPLETED, %d errors; raw: %s business effects",
		thousands(pg.calls), thousands(r.Counts.BusinessRows), r.Errors, thousands(r.Counts.RawBusiness))
	return r
}

// pginboxDrain runs a worker until the database shows every receipt COMPLETED.
// A worker has no per-message call to time from outside, so this phase has a
// rate but no latencies.
// With rls, tenancy is enabled for the phase, the handlers run on the
// application role and the worker's SystemPool on the system role. A
// non-empty profile names the phase's profile (startProfile), taken while
// the pool's backends still exist.
func (s *suite) pginboxDrain(ctx context.Context, label string, n, concurrency, perTx int, hooks *Hooks, rls bool, profile string) (sample, error) {
	base := s.base
	var sys *pgxpool.Pool
	if rls {
		off, err := s.rlsOn(ctx)
		if err != nil {
			return sample{}, err
		}
		defer off()
		base = s.asRole(rlsAppRole)
		if sys, err = newPool(ctx, s.asRole(rlsSysRole), 3); err != nil {
			return sample{}, err
		}
		defer sys.Close()
	}
	pool, err := newNamedPool(ctx, base, concurrency+2, appDrain)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	var handled, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: benchConsumer, EventType: benchEventType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, rawEffectSQL, m.ReceiptID, m.MessageID)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
				return err
			}
			handled.Add(1)
			return nil
		})
	if err != nil {
		return sample{}, err
	}
	w, err := inbox.NewWorker(pool, reg, hooks.worker(inbox.WorkerConfig{Concurrency: concurrency, MessagesPerTx: perTx, Logger: discardLogger, SystemPool: sys}))
	if err != nil {
		return sample{}, err
	}
	defer hooks.observe(w)() // after Stop, below
	completed := func() (int, error) {
		var c int
		err := s.admin.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts_live WHERE status = 'COMPLETED'").Scan(&c)
		return c, err
	}
	stopProfile := s.startProfile(profile)
	stop := s.prog.phase(label, n, func() int { return int(handled.Load()) })
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		stop()
		stopProfile(0)
		return sample{}, err
	}
	var waitErr error
	for {
		// Ask the database only once the handlers have run for every receipt.
		if int(handled.Load()) >= n {
			c, err := completed()
			if err != nil {
				waitErr = err
				break
			}
			if c >= n {
				break
			}
		}
		if ctx.Err() != nil {
			waitErr = ctx.Err()
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stop()
	stopProfile(int(handled.Load()))
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		return sample{}, err
	}
	if waitErr != nil {
		return sample{}, waitErr
	}
	got := sample{calls: n, elapsed: elapsed, errors: int(failed.Load())}
	if p := firstErr.Load(); p != nil {
		got.firstErr = *p
	}
	return got, nil
}

func (s *suite) rawDrain(ctx context.Context, label string, ids [][16]byte, concurrency, perTx int, profile string) (sample, error) {
	pool, err := newNamedPool(ctx, s.base, concurrency, appDrain)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	batches := (len(ids) + perTx - 1) / perTx
	stopProfile := s.startProfile(profile)
	got := load(ctx, s.prog, label, batches, concurrency, perTx, func(ctx context.Context, b int) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		for i := b * perTx; i < min(len(ids), (b+1)*perTx); i++ {
			if _, err := tx.Exec(ctx, rawEffectSQL, ids[i], seedID("backlog", i)); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, rawCompleteSQL, ids[i])
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("receipt %d: completion matched %d rows", i, tag.RowsAffected())
			}
		}
		return tx.Commit(ctx)
	})
	stopProfile(got.calls)
	return got, nil
}
