package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/drillkit"
)

// xminHold measures pginbox while a transaction that took an XID sits idle
// (a held xmin horizon: nothing newer can be vacuumed): accepts at a fixed
// rate and a worker, before, during and after the hold. It has no raw side:
// it compares pginbox with itself.
func (s *suite) xminHold(ctx context.Context) *Result {
	o := s.o
	r := &Result{
		Scenario: ScenarioXminHold,
		Description: fmt.Sprintf("Accept at %d/s and a worker (Concurrency 4) for %s, then %s with an idle transaction holding the xmin horizon, then %s more",
			o.HoldRate, o.HoldAround, o.Hold, o.HoldAround),
		Concurrency: 4, Rounds: 1, OK: true, Failures: []string{},
		Target: "every receipt completed once; completed/s during the hold >= 0.8 x before",
		Raw:    Measure{Description: "none: the scenario compares the phases before, during and after the hold"},
	}
	if err := s.reset(ctx, 0); err != nil {
		r.failf("%v", err)
		return r
	}
	claims := &drillkit.ClaimTimer{}
	cfg := s.base.Copy()
	cfg.ConnConfig.Tracer = claims
	pool, err := newPool(ctx, cfg, 10)
	if err != nil {
		r.failf("%v", err)
		return r
	}
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		r.failf("%v", err)
		return r
	}
	defer client.Close()
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: benchConsumer, EventType: benchEventType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, rawEffectSQL, m.ReceiptID, m.MessageID)
			return err
		})
	if err != nil {
		r.failf("%v", err)
		return r
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Concurrency: 4, Logger: discardLogger})
	if err == nil {
		err = w.Start(ctx)
	}
	if err != nil {
		r.failf("%v", err)
		return r
	}
	defer w.Stop(context.WithoutCancel(ctx))

	start := time.Now()
	res, err := drillkit.Hold(ctx, drillkit.HoldOptions{
		Client:  client,
		Message: func(i int) inbox.Message { return message(seedID("hold", i), i) },
		Admin:   s.admin, Claims: claims, Rate: float64(o.HoldRate),
		Before: o.HoldAround, Hold: o.Hold, After: o.HoldAround,
		Progress: func(phase string) { s.prog.note("  %s: %s", ScenarioXminHold, phase) },
	})
	if err != nil {
		r.failf("%v", err)
		return r
	}
	out, err := res.Load.Wait(ctx)
	if err != nil {
		r.failf("%v", err)
		return r
	}
	acked := len(out.Acked)
	var c dbCounts
	deadline := time.Now().Add(time.Minute)
	for {
		if c, err = s.counts(ctx); err != nil {
			r.failf("%v", err)
			return r
		}
		if c.completed >= acked || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)

	r.Calls, r.Seconds = acked, round2(elapsed.Seconds())
	r.CallsPerSec = round2(float64(acked) / elapsed.Seconds())
	r.Errors = out.Attempts - acked
	r.Counts.Accepted, r.Counts.BusinessRows, r.Counts.ReceiptsInDB = acked, c.effects, c.receipts
	r.Extra = map[string]float64{
		"hold_seconds":             o.Hold.Seconds(),
		"dead_tuples_after_vacuum": float64(res.DeadAfterVacuum),
	}
	for _, p := range res.Phases {
		r.Extra["accepts_per_sec_"+p.Name] = round2(p.AcksPerSec)
		r.Extra["completed_per_sec_"+p.Name] = round2(p.CompletedPerSec)
		r.Extra["claim_p50_ms_"+p.Name] = ms(p.ClaimP50)
		r.Extra["claim_p95_ms_"+p.Name] = ms(p.P95)
		r.Extra["dead_tuples_max_"+p.Name] = float64(p.DeadTuplesMax)
	}
	before, hold := res.Phases[0], res.Phases[1]
	r.P50Ms, r.P95Ms = ms(hold.ClaimP50), ms(hold.P95) // the claim statement during the hold
	if before.CompletedPerSec > 0 {
		r.Ratio = round2(hold.CompletedPerSec / before.CompletedPerSec)
	}
	r.MeetsTarget = r.Ratio >= 0.8
	if r.Errors != 0 {
		r.failf("%d accept attempts failed, first: %v", r.Errors, out.Errors)
	}
	if acked != out.Sent || c.receipts != acked || c.completed != acked || c.effects != acked {
		r.failf("%d sent, %d acknowledged: %d receipts, %d COMPLETED, %d business rows", out.Sent, acked, c.receipts, c.completed, c.effects)
	}
	r.Verified = fmt.Sprintf("%s accepted, %s COMPLETED, %s business rows; dead row versions peaked at %s during the hold, %s after VACUUM",
		thousands(acked), thousands(c.completed), thousands(c.effects), thousands(int(hold.DeadTuplesMax)), thousands(int(res.DeadAfterVacuum)))
	return r
}
