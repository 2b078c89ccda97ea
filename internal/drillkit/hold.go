package drillkit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// HoldOptions configure a held-xmin-horizon run: accepts at a fixed rate and
// a running worker, before, during and after a transaction that took an XID
// and then sits idle.
type HoldOptions struct {
	Client  *inbox.Client             // accepts the messages
	Message func(i int) inbox.Message // defaults to Message
	// Admin opens the holding transaction and reads statistics; it must
	// see pginbox_receipts.
	Admin  *pgxpool.Pool
	Claims *ClaimTimer   // on the worker's pool
	Rate   float64       // accepts per second
	Before time.Duration // the phase before the transaction opens
	Hold   time.Duration // the phase it stays open, idle
	After  time.Duration // the phase after it rolled back
	// Progress, when set, is told when each phase starts.
	Progress func(phase string)
}

// HoldPhase is what one phase measured.
type HoldPhase struct {
	Name            string        // before, hold or after
	Seconds         float64       // the phase's wall time
	Acked           int           // accepts acknowledged during the phase
	Completed       int           // receipts completed during the phase
	AcksPerSec      float64       // Acked / Seconds
	CompletedPerSec float64       // Completed / Seconds
	Claims          int           // claim statements the worker ran
	ClaimP50, P95   time.Duration // claim statement latency
	DeadTuplesMax   int64         // n_dead_tup of pginbox_receipts, sampled every second
}

// HoldResult is the run's figures and its load's outcome.
type HoldResult struct {
	Phases []HoldPhase // before, hold, after
	// DeadAfterVacuum is n_dead_tup once the hold ended and VACUUM ran.
	DeadAfterVacuum int64
	Load            *Running // the load, still running until every message is acknowledged
}

// Hold runs the phases and returns their figures. The load goes on past
// the last phase until every message is acknowledged: wait for it with
// HoldResult.Load.
func Hold(ctx context.Context, o HoldOptions) (*HoldResult, error) {
	total := o.Before + o.Hold + o.After
	count := int(o.Rate * total.Seconds())
	load := Load{Client: o.Client, Message: o.Message, Count: count, Rate: o.Rate, Senders: 8}.Start(ctx)
	res := &HoldResult{Load: load}
	o.Claims.Take()
	phase := func(name string, d time.Duration, during func()) error {
		if o.Progress != nil {
			o.Progress(name)
		}
		p := HoldPhase{Name: name}
		completed0, err := completedCount(ctx, o.Admin)
		if err != nil {
			return err
		}
		acked0 := len(load.Snapshot().Acked)
		t0 := time.Now()
		for end := t0.Add(d); time.Now().Before(end); {
			dead, err := deadTuples(ctx, o.Admin)
			if err != nil {
				return err
			}
			p.DeadTuplesMax = max(p.DeadTuplesMax, dead)
			if !sleepUntil(ctx, minTime(end, time.Now().Add(time.Second))) {
				return ctx.Err()
			}
		}
		p.Seconds = time.Since(t0).Seconds()
		completed1, err := completedCount(ctx, o.Admin)
		if err != nil {
			return err
		}
		p.Acked = len(load.Snapshot().Acked) - acked0
		p.Completed = completed1 - completed0
		p.AcksPerSec = float64(p.Acked) / p.Seconds
		p.CompletedPerSec = float64(p.Completed) / p.Seconds
		claims := o.Claims.Take()
		p.Claims, p.ClaimP50, p.P95 = len(claims), Percentile(claims, 50), Percentile(claims, 95)
		res.Phases = append(res.Phases, p)
		if during != nil {
			during()
		}
		return nil
	}
	if err := phase("before", o.Before, nil); err != nil {
		return res, err
	}
	// The holder: a transaction with an XID, idle. Nothing it could see may
	// be vacuumed away while it lives.
	holder, err := o.Admin.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("drillkit: holding xmin: %w", err)
	}
	if _, err := holder.Exec(ctx, "SELECT txid_current()"); err != nil {
		holder.Rollback(context.Background())
		return res, fmt.Errorf("drillkit: holding xmin: %w", err)
	}
	err = phase("hold", o.Hold, func() { holder.Rollback(context.Background()) })
	if err != nil {
		holder.Rollback(context.Background())
		return res, err
	}
	if err := phase("after", o.After, nil); err != nil {
		return res, err
	}
	if _, err := o.Admin.Exec(ctx, "VACUUM pginbox_receipts, pginbox_work"); err != nil {
		return res, fmt.Errorf("drillkit: vacuum: %w", err)
	}
	res.DeadAfterVacuum, err = deadTuples(ctx, o.Admin)
	return res, err
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func completedCount(ctx context.Context, db Querier) (int, error) {
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'").Scan(&n); err != nil {
		return 0, fmt.Errorf("drillkit: %w", err)
	}
	return n, nil
}

// deadTuples is the statistics' count of dead row versions in pginbox's
// tables (receipts and the queue): what an operator's monitoring sees.
func deadTuples(ctx context.Context, db Querier) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, "SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE relname IN ('pginbox_receipts', 'pginbox_work')").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("drillkit: %w", err)
	}
	return n, nil
}

// String is the phase as one line.
func (p HoldPhase) String() string {
	return fmt.Sprintf("%s: %.0fs accepts/s=%.0f completed/s=%.0f claim_p50=%s claim_p95=%s claims=%d dead_tuples_max=%d",
		p.Name, p.Seconds, p.AcksPerSec, p.CompletedPerSec, p.ClaimP50.Round(10*time.Microsecond), p.P95.Round(10*time.Microsecond), p.Claims, p.DeadTuplesMax)
}
