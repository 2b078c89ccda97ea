package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// The fairness scenario's shape: cold tenants send one message every
// fairnessEvery between them while, in the paced phase, one hot tenant sends
// 100 for every cold one as they go (fairnessPaced a second), and in the
// flood phase its backlog (accepted before the worker starts) drains as fast
// as it can, all of it due from the start. The backlog, fairnessHotPerSec
// for each second of the phase, outlasts the phase at up to that many
// handled a second; the flood's figures count only the cold messages
// accepted before its last hot message was handled.
const (
	fairnessEvery       = 200 * time.Millisecond
	fairnessColdTenants = 4
	fairnessPaced       = 100 * int(time.Second/fairnessEvery)
	fairnessHotPerSec   = 5_000
	fairnessHotTenant   = "tenant-hot"
)

// fairness measures what one tenant's traffic costs the others: the pickup
// latency of cold tenants' messages (handler start minus accept) with an
// idle inbox, while a hot tenant sends 100 times their rate, and while a hot
// tenant's backlog drains, with the worker's defaults (Concurrency
// --concurrency, MessagesPerTx 1). The target, on the backlog (the harder
// of the two): the cold tenants' p95 under the flood at most 2 x their p95
// without it.
func (s *suite) fairness(ctx context.Context) *Result {
	o := s.o
	hot := fairnessHotPerSec * int(math.Ceil(o.JobDuration.Seconds()))
	r := &Result{
		Scenario: "fairness",
		Description: fmt.Sprintf("%d cold tenants send one message every %s between them, first alone, then while one hot tenant sends %d a second, then while one hot tenant's %s-message backlog drains (only cold messages accepted before its last one was handled count); Worker Concurrency %d, defaults otherwise; handlers wait %s; %s per phase",
			fairnessColdTenants, fairnessEvery, fairnessPaced, thousands(hot), o.Concurrency, o.JobSleep, o.JobDuration),
		Concurrency: o.Concurrency, Rounds: 1, OK: true, Failures: []string{},
		Target: "cold tenants' pickup p95 under the flood <= 2 x their p95 without it",
		Raw:    Measure{Description: "raw pickups during the flood, one every 200ms beside the cold tenants: a row committed with a NOTIFY in one statement, heard on a listening connection and claimed in one UPDATE committed without waiting for the disk, on connections of their own; the least a queue woken by NOTIFY does to hand a message over"},
	}
	if err := s.createPickupTable(ctx); err != nil {
		r.failf("%v", err)
		return r
	}
	defer s.dropPickupTable(ctx)
	idle, err := s.fairnessPhase(ctx, "fairness idle", 0, 0, true)
	if err != nil {
		r.failf("%v", err)
		return r
	}
	paced, err := s.fairnessPhase(ctx, "fairness paced hot tenant", 0, fairnessPaced, true)
	if err != nil {
		r.failf("%v", err)
		return r
	}
	flood, err := s.fairnessPhase(ctx, "fairness flood", hot, 0, true)
	if err != nil {
		r.failf("%v", err)
		return r
	}
	if len(flood.cold) < 5 {
		r.failf("only %d cold messages were accepted while the hot tenant's %s-message backlog lasted: too few for a p95 (the backlog drained early)", len(flood.cold), thousands(hot))
		return r
	}
	alone, err := s.fairnessPhase(ctx, "fairness hot tenant alone", hot, 0, false)
	if err != nil {
		r.failf("%v", err)
		return r
	}
	r.Calls, r.Seconds = len(flood.cold), round2(flood.window.Seconds())
	r.CallsPerSec = round2(flood.hotRate())
	r.P50Ms, r.P95Ms, r.P99Ms = ms(percentile(flood.cold, 50)), ms(percentile(flood.cold, 95)), ms(percentile(flood.cold, 99))
	r.setExtra("cold_idle_p50_ms", ms(percentile(idle.cold, 50)))
	r.setExtra("cold_idle_p95_ms", ms(percentile(idle.cold, 95)))
	r.setExtra("cold_idle_p99_ms", ms(percentile(idle.cold, 99)))
	r.setExtra("cold_flood_max_ms", ms(slices.Max(flood.cold)))
	r.setExtra("cold_paced_p50_ms", ms(percentile(paced.cold, 50)))
	r.setExtra("cold_paced_p95_ms", ms(percentile(paced.cold, 95)))
	r.setExtra("cold_paced_p99_ms", ms(percentile(paced.cold, 99)))
	r.setExtra("hot_paced_per_sec", round2(float64(paced.hotDone)/paced.window.Seconds()))
	// The pickup latency counts from the Accept call: its own commit is
	// part of it, and under the flood that commit queues for the WAL flush
	// behind the hot tenant's handler transactions. The raw pickups, idle
	// and under load, bound what a queue could do here: their ratio is the
	// machine's, not the claim order's.
	r.Raw.Calls = len(flood.raw)
	r.Raw.P50Ms, r.Raw.P95Ms, r.Raw.P99Ms = ms(percentile(flood.raw, 50)), ms(percentile(flood.raw, 95)), ms(percentile(flood.raw, 99))
	for _, p := range []struct {
		name string
		run  fairnessRun
	}{{"idle", idle}, {"paced", paced}, {"flood", flood}} {
		r.setExtra("cold_"+p.name+"_accept_p95_ms", ms(percentile(p.run.accepts, 95)))
		r.setExtra("cold_"+p.name+"_after_accept_p50_ms", ms(percentile(p.run.after, 50)))
		r.setExtra("cold_"+p.name+"_after_accept_p95_ms", ms(percentile(p.run.after, 95)))
		r.setExtra("cold_"+p.name+"_accept_to_claim_p50_ms", ms(percentile(p.run.toClaim, 50)))
		r.setExtra("cold_"+p.name+"_accept_to_claim_p95_ms", ms(percentile(p.run.toClaim, 95)))
		r.setExtra("cold_"+p.name+"_claim_to_start_p50_ms", ms(percentile(p.run.toStart, 50)))
		r.setExtra("cold_"+p.name+"_claim_to_start_p95_ms", ms(percentile(p.run.toStart, 95)))
		r.setExtra("raw_"+p.name+"_p50_ms", ms(percentile(p.run.raw, 50)))
		r.setExtra("raw_"+p.name+"_p95_ms", ms(percentile(p.run.raw, 95)))
	}
	if p := percentile(idle.raw, 95); p > 0 {
		r.setExtra("raw_paced_p95_vs_idle", round2(float64(percentile(paced.raw, 95))/float64(p)))
		r.setExtra("raw_flood_p95_vs_idle", round2(float64(percentile(flood.raw, 95))/float64(p)))
	}
	r.setExtra("hot_completed_per_sec", round2(flood.hotRate()))
	r.setExtra("hot_alone_per_sec", round2(alone.hotRate()))
	r.setExtra("hot_left_at_end", float64(hot-flood.hotDone))
	r.setExtra("cold_flood_sent", float64(flood.sent))
	r.setExtra("claim_scopes", float64(o.ClaimScopes)) // 0: the worker's default
	r.setExtra("claim_batch", float64(o.ClaimBatch))   // 0: the worker's default
	if a := alone.hotRate(); a > 0 {
		r.setExtra("hot_throughput_vs_alone", round2(flood.hotRate()/a))
	}
	if p := percentile(idle.cold, 95); p > 0 {
		r.setExtra("cold_paced_p95_vs_idle", round2(float64(percentile(paced.cold, 95))/float64(p)))
		r.Ratio = round2(float64(percentile(flood.cold, 95)) / float64(p))
		r.MeetsTarget = r.Ratio <= 2 && flood.hotRate() >= 0.9*alone.hotRate()
		if raw := r.Extra["raw_flood_p95_vs_idle"]; raw > 0 {
			r.setExtra("ratio_over_raw_ratio", round2(r.Ratio/raw))
		}
	}
	r.Verified = fmt.Sprintf("%d cold messages handled alone, %d beside the paced hot tenant (%s hot handled) and %d during the flood, each once (%d of them accepted while the backlog lasted count); %s hot messages completed in the %.0fs window with the cold tenants, %s without them; %d, %d and %d raw pickups, each row claimed once",
		len(idle.cold), len(paced.cold), thousands(paced.hotDone), flood.sent, len(flood.cold), thousands(flood.hotDone), flood.window.Seconds(), thousands(alone.hotDone), len(idle.raw), len(paced.raw), len(flood.raw))
	return r
}

// fairnessRun is what one phase saw.
type fairnessRun struct {
	cold    []time.Duration // pickup latency of every cold message, sorted
	accepts []time.Duration // how long each cold message's Accept took, sorted
	after   []time.Duration // from each cold Accept's return to its handler's start, sorted
	toClaim []time.Duration // from each cold Accept's return to its claim, sorted
	toStart []time.Duration // from each cold claim to its handler's start, sorted
	raw     []time.Duration // the raw pickups' latencies (rawPickups), sorted
	sent    int             // cold messages sent in the window (cold counts those the phase kept)
	hotDone int             // hot messages handled in the window
	hotBusy time.Duration   // from the start to the last hot message handled in the window
	window  time.Duration
}

// hotRate is the hot tenant's completions per second while it had work: a
// backlog that drains before the window ends is not diluted by idle time.
func (f fairnessRun) hotRate() float64 {
	if f.hotBusy <= 0 {
		return 0
	}
	return float64(f.hotDone) / f.hotBusy.Seconds()
}

// fairnessPhase accepts hot messages of the hot tenant, starts a worker,
// sends cold messages for JobDuration (only waits, without cold), and
// hotPerSec hot messages a second meanwhile, and waits until each cold one
// was handled.
func (s *suite) fairnessPhase(ctx context.Context, label string, hot, hotPerSec int, cold bool) (fairnessRun, error) {
	o := s.o
	if err := s.reset(ctx, 0); err != nil {
		return fairnessRun{}, err
	}
	if cold {
		if _, err := s.admin.Exec(ctx, "TRUNCATE "+pickupTable); err != nil {
			return fairnessRun{}, fmt.Errorf("bench: %w", err)
		}
	}
	pool, err := newNamedPool(ctx, s.base, o.Concurrency+4, appDrain)
	if err != nil {
		return fairnessRun{}, err
	}
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		return fairnessRun{}, err
	}
	defer client.Close()
	batch := make([]inbox.Message, 0, 500)
	for i := range hot {
		if batch = append(batch, hotMessage(i)); len(batch) == cap(batch) || i == hot-1 {
			if _, err := client.AcceptBatch(ctx, batch); err != nil {
				return fairnessRun{}, fmt.Errorf("%s: accepting the hot backlog: %w", label, err)
			}
			batch = batch[:0]
		}
	}

	var mu sync.Mutex
	called := map[string]time.Time{} // cold message ID -> its Accept call
	var hotDone, hotLast atomic.Int64
	seen := map[string]int{}
	started := map[string]time.Time{}     // cold message ID -> its handler's first start
	returned := map[string]time.Time{}    // cold message ID -> its Accept's return
	claimedAt := map[inbox.ID]time.Time{} // cold receipt -> when the worker claimed it
	coldIDs := map[inbox.ID]string{}      // cold receipt -> its message ID
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: benchConsumer, EventType: benchEventType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if m.Scope.ID == fairnessHotTenant {
				time.Sleep(o.JobSleep)
				hotDone.Add(1)
				hotLast.Store(time.Now().UnixNano())
				return nil
			}
			mu.Lock()
			if seen[m.MessageID] == 0 {
				started[m.MessageID] = time.Now()
			}
			seen[m.MessageID]++
			mu.Unlock()
			time.Sleep(o.JobSleep)
			return nil
		})
	if err != nil {
		return fairnessRun{}, err
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Concurrency: o.Concurrency, ClaimBatch: o.ClaimBatch, ClaimScopes: o.ClaimScopes, Logger: discardLogger})
	if err != nil {
		return fairnessRun{}, err
	}
	// The claim splits a cold message's time after its Accept into finding
	// it (wake-up and claim) and starting it (the ready queue and the
	// handler transaction's opening).
	claims := w.Subscribe(inbox.SubscribeConfig{Kinds: []inbox.EventKind{inbox.EventClaimed}, Buffer: 10_000})
	defer claims.Close()
	claimsRead := make(chan struct{})
	go func() {
		defer close(claimsRead)
		for e := range claims.C() {
			if e.Scope.ID == fairnessHotTenant {
				continue
			}
			mu.Lock()
			if _, ok := claimedAt[e.ReceiptID]; !ok {
				claimedAt[e.ReceiptID] = e.At
			}
			mu.Unlock()
		}
	}()
	if err := w.Start(ctx); err != nil {
		return fairnessRun{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		w.Stop(stopCtx)
	}()

	start := time.Now()
	pacedErr := make(chan error, 1)
	if hotPerSec > 0 {
		pctx, stopPaced := context.WithCancel(ctx)
		defer stopPaced()
		go func() { pacedErr <- paceHot(pctx, client, hotPerSec, start.Add(o.JobDuration)) }()
	} else {
		pacedErr <- nil
	}
	type rawResult struct {
		ps  []rawPickup
		err error
	}
	rawDone := make(chan rawResult, 1)
	if cold {
		rctx, stopRaw := context.WithCancel(ctx)
		defer stopRaw()
		go func() {
			ps, err := s.rawPickups(rctx, start.Add(o.JobDuration))
			rawDone <- rawResult{ps, err}
		}()
	} else {
		rawDone <- rawResult{}
	}
	sent := 0
	tick := time.NewTicker(fairnessEvery)
	for time.Since(start) < o.JobDuration {
		if !cold {
			if int(hotDone.Load()) == hot {
				break
			}
			select {
			case <-ctx.Done():
				return fairnessRun{}, ctx.Err()
			case <-tick.C:
			}
			continue
		}
		m := message(fmt.Sprintf("cold-%06d", sent), sent)
		m.Scope = inbox.Tenant(fmt.Sprintf("tenant-cold-%d", sent%fairnessColdTenants))
		callAt := time.Now()
		res, err := client.Accept(ctx, m)
		if err != nil {
			return fairnessRun{}, fmt.Errorf("%s: accepting a cold message: %w", label, err)
		}
		mu.Lock()
		called[m.MessageID] = callAt
		returned[m.MessageID] = time.Now()
		coldIDs[res.ID] = m.MessageID
		mu.Unlock()
		sent++
		select {
		case <-ctx.Done():
			return fairnessRun{}, ctx.Err()
		case <-tick.C:
		}
	}
	tick.Stop()
	if err := <-pacedErr; err != nil {
		return fairnessRun{}, fmt.Errorf("%s: accepting the paced hot messages: %w", label, err)
	}
	window := time.Since(start)
	done := int(hotDone.Load())
	var busy time.Duration
	if last := hotLast.Load(); last > 0 {
		busy = min(window, time.Unix(0, last).Sub(start))
	}
	raw := <-rawDone
	if raw.err != nil {
		return fairnessRun{}, fmt.Errorf("%s: %w", label, raw.err)
	}
	if cold {
		claimed, rows, err := s.claimedPickups(ctx)
		if err != nil {
			return fairnessRun{}, err
		}
		if claimed != len(raw.ps) || rows != len(raw.ps) {
			return fairnessRun{}, fmt.Errorf("%s: %d raw pickups measured, the database holds %d rows of them, %d claimed", label, len(raw.ps), rows, claimed)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(started)
		mu.Unlock()
		if n >= sent {
			break
		}
		if time.Now().After(deadline) {
			return fairnessRun{}, fmt.Errorf("%s: %d of %d cold messages handled a minute after the last was sent", label, n, sent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	claims.Close()
	<-claimsRead
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			return fairnessRun{}, fmt.Errorf("%s: cold message %s handled %d times", label, id, n)
		}
	}
	if len(seen) != sent {
		return fairnessRun{}, fmt.Errorf("%s: %d distinct cold messages handled, %d sent", label, len(seen), sent)
	}
	// Beside a backlog, a cold message (and a raw pickup) counts only if the
	// hot tenant still had work when it was sent; until is read once, as the
	// worker may still be running hot handlers.
	var until time.Time
	if hot > 0 {
		until = time.Unix(0, hotLast.Load())
	}
	counts := func(id string) bool { return until.IsZero() || called[id].Before(until) }
	var picked, accepts, after []time.Duration
	for id, t := range started {
		if !counts(id) {
			continue
		}
		picked = append(picked, t.Sub(called[id]))
		accepts = append(accepts, returned[id].Sub(called[id]))
		// A handler can start before its Accept returns to the caller.
		after = append(after, max(t.Sub(returned[id]), 0))
	}
	var toClaim, toStart []time.Duration
	for rid, at := range claimedAt {
		id, ok := coldIDs[rid]
		if !ok || !counts(id) {
			continue
		}
		toClaim = append(toClaim, max(at.Sub(returned[id]), 0))
		toStart = append(toStart, max(started[id].Sub(at), 0))
	}
	slices.Sort(picked)
	slices.Sort(accepts)
	slices.Sort(after)
	slices.Sort(toClaim)
	slices.Sort(toStart)
	run := fairnessRun{raw: sortedTook(raw.ps, until), sent: sent, cold: picked, accepts: accepts, after: after, toClaim: toClaim, toStart: toStart, hotDone: done, hotBusy: busy, window: window}
	if cold {
		s.prog.note("  %-44s cold p95 %.1f ms, %s hot handled", label, ms(percentile(picked, 95)), thousands(done))
	} else {
		s.prog.note("  %-44s %s hot handled, %.0f/s", label, thousands(done), run.hotRate())
	}
	return run, nil
}

// paceHot accepts perSec messages a second of the hot tenant until end, in
// a batch every 10 ms.
func paceHot(ctx context.Context, client *inbox.Client, perSec int, end time.Time) error {
	const every = 10 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	start, sent := time.Now(), 0
	for now := start; now.Before(end); now = time.Now() {
		due := int(float64(perSec) * now.Sub(start).Seconds())
		if due > sent {
			batch := make([]inbox.Message, 0, due-sent)
			for ; sent < due; sent++ {
				batch = append(batch, hotMessage(sent))
			}
			if _, err := client.AcceptBatch(ctx, batch); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// hotMessage is the hot tenant's message number i.
func hotMessage(i int) inbox.Message {
	m := message(fmt.Sprintf("hot-%06d", i), i)
	m.Scope = inbox.Tenant(fairnessHotTenant)
	return m
}
