package bench

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// ingestVia is how the producers of an ingest scenario feed the inbox.
type ingestVia int

const (
	viaAcceptBatch ingestVia = iota // Client.AcceptBatch, up to IngestBatch messages a call
	viaAccept                       // Client.Accept, one message a call
)

// ingestSampleEvery is the window of one completions/s sample, as the
// external job-queue harness samples its adapters (shorter phases sample
// more often so the median has at least four samples).
const ingestSampleEvery = 5 * time.Second

// depthPollEvery is how often the producers learn the backlog's depth, as
// the harness's adapters poll theirs.
const depthPollEvery = 200 * time.Millisecond

// ingest measures what a user sees: messages arrive through the inbox's own
// accept path WHILE a worker drains them, on the same machine and database.
// Producers keep the due backlog JobBacklog deep (a depth target, like the
// external harness), handlers wait JobSleep and do nothing else, the worker
// runs with its default ClaimBatch (or Options.ClaimBatch). The figure is the
// median of the completions/s samples after JobWarmup; beside it, the backlog
// actually held, pickup latency (handler start minus the time the producer
// sent the message) and dead tuples per 1,000 completed messages.
func (s *suite) ingest(ctx context.Context, via ingestVia, workers, perTx int) *Result {
	o := s.o
	name, feed := "ingest", fmt.Sprintf("AcceptBatch of up to %d from %d producer(s)", o.IngestBatch, o.IngestCallers)
	if via == viaAccept {
		name, feed = "ingest-accept", fmt.Sprintf("Accept from %d callers", o.Concurrency)
	}
	if perTx > 1 {
		name += "-batched"
	}
	claim := "default ClaimBatch"
	if o.ClaimBatch > 0 {
		claim = fmt.Sprintf("ClaimBatch %d", o.ClaimBatch)
	}
	r := &Result{
		Scenario: fmt.Sprintf("%s-c%d", name, workers),
		Description: fmt.Sprintf("%s keeps the due backlog %s deep while a Worker (Concurrency %d, MessagesPerTx %d, %s) drains it; handlers wait %s; %d tenant(s); median completions/s over %s after %s warm-up",
			feed, thousands(o.JobBacklog), workers, perTx, claim, o.JobSleep, o.IngestTenants, o.JobDuration, o.JobWarmup),
		Concurrency: workers, Rounds: o.Rounds, OK: true, Failures: []string{},
		Target: "ahead of River 0.51.2 measured the same way (cmd/inbox/riverbench --scenario ingest)",
		Raw:    Measure{Description: "none: compared with River's InsertManyFast feeding its own workers, measured by riverbench"},
	}
	var all ingestPhase
	var writes tableStats
	statsOK := true
	for round := range o.Rounds {
		if err := s.reset(ctx, 0); err != nil {
			r.failf("%v", err)
			return r
		}
		statsOK = statsOK && s.resetStats(ctx)
		label := fmt.Sprintf("%s round %d/%d", r.Scenario, round+1, o.Rounds)
		got, err := s.ingestPhase(ctx, label, fmt.Sprintf("%s-round%d", r.Scenario, round+1), via, workers, perTx)
		if err != nil {
			r.failf("%v", err)
			return r
		}
		if statsOK {
			t, err := s.receiptStats(ctx)
			if err != nil {
				r.failf("%v", err)
				return r
			}
			writes.add(t.withoutInserts()) // the producers'
		}
		all.add(got)
	}
	r.Calls, r.Seconds = all.completions, round2(all.window.Seconds())
	r.CallsPerSec = round2(median(all.rates))
	slices.Sort(all.pickups)
	r.P50Ms, r.P95Ms, r.P99Ms = ms(percentile(all.pickups, 50)), ms(percentile(all.pickups, 95)), ms(percentile(all.pickups, 99))
	r.Counts.Accepted = all.accepted
	r.setExtra("completions_mean_per_sec", round2(float64(all.completions)/all.window.Seconds()))
	r.setExtra("accepted_per_sec", round2(float64(all.acceptedInWindow)/all.window.Seconds()))
	r.setExtra("backlog_median", median(all.depths))
	r.setExtra("backlog_min", slices.Min(append(all.depths, float64(o.JobBacklog))))
	slices.Sort(all.callLatencies)
	r.setExtra("accept_call_p50_ms", ms(percentile(all.callLatencies, 50)))
	r.setExtra("accept_call_p95_ms", ms(percentile(all.callLatencies, 95)))
	r.setExtra("dead_tuples_end", float64(all.deadEnd))
	if all.completedAtEnd > 0 {
		r.setExtra("dead_tuples_end_per_1k", round2(float64(all.deadEnd)*1000/float64(all.completedAtEnd)))
	}
	r.setExtra("claim_batch", float64(o.ClaimBatch)) // 0: the worker's default
	r.setExtra("load_avg_start", all.loadStart)
	r.setExtra("load_avg_end", all.loadEnd)
	if statsOK {
		rowVersions(r, writes, all.handled)
	}
	r.Verified = fmt.Sprintf("%s accepted (%s producer calls, 0 errors), %s handler runs, every one COMPLETED in the database; %s completions in the %.0fs measured",
		thousands(all.accepted), thousands(all.calls), thousands(all.handled), thousands(all.completions), all.window.Seconds())
	return r
}

// ingestPhase is what one measured phase saw.
type ingestPhase struct {
	completions      int // in the measured window
	window           time.Duration
	rates            []float64 // completions/s, one per sample
	depths           []float64 // due backlog, one per depth poll in the window
	pickups          []time.Duration
	callLatencies    []time.Duration // producer calls in the window
	acceptedInWindow int
	accepted, calls  int // over the whole phase
	handled          int
	deadEnd          int64 // dead tuples of both tables at the window's end
	completedAtEnd   int   // handler runs from the phase's start to the window's end
	loadStart        float64
	loadEnd          float64
}

func (p *ingestPhase) add(o ingestPhase) {
	p.completions += o.completions
	p.window += o.window
	p.rates = append(p.rates, o.rates...)
	p.depths = append(p.depths, o.depths...)
	p.pickups = append(p.pickups, o.pickups...)
	p.callLatencies = append(p.callLatencies, o.callLatencies...)
	p.acceptedInWindow += o.acceptedInWindow
	p.accepted += o.accepted
	p.calls += o.calls
	p.handled += o.handled
	p.deadEnd += o.deadEnd
	p.completedAtEnd += o.completedAtEnd
	p.loadStart = max(p.loadStart, o.loadStart)
	p.loadEnd = max(p.loadEnd, o.loadEnd)
}

// ingestRecorder is what producers, handlers and the sampler share.
type ingestRecorder struct {
	measuring     atomic.Bool
	accepted      atomic.Int64
	calls         atomic.Int64
	handled       atomic.Int64
	mu            sync.Mutex
	pickups       []time.Duration
	callLatencies []time.Duration
	depths        []float64
	firstErr      atomic.Pointer[error]
}

func (rec *ingestRecorder) fail(err error) { rec.firstErr.CompareAndSwap(nil, &err) }

func (rec *ingestRecorder) err() error {
	if p := rec.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

const acceptedAtKey = "accepted_at_us"

func (s *suite) ingestPhase(ctx context.Context, label, profileName string, via ingestVia, workers, perTx int) (ingestPhase, error) {
	o := s.o
	callers := o.IngestCallers
	if via == viaAccept {
		callers = o.Concurrency
	}
	workerPool, err := newNamedPool(ctx, s.base, workers+2, appDrain)
	if err != nil {
		return ingestPhase{}, err
	}
	defer workerPool.Close()
	ingestPool, err := newNamedPool(ctx, s.base, callers+1, appIngest) // + the coalesced wake-ups
	if err != nil {
		return ingestPhase{}, err
	}
	defer ingestPool.Close()
	client, err := inbox.NewClient(ingestPool, inbox.Config{Logger: discardLogger})
	if err != nil {
		return ingestPhase{}, err
	}
	defer client.Close()

	rec := &ingestRecorder{}
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: benchConsumer, EventType: benchEventType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if rec.measuring.Load() {
				if us, err := strconv.ParseInt(m.Metadata[acceptedAtKey], 10, 64); err == nil {
					d := time.Since(time.UnixMicro(us))
					rec.mu.Lock()
					rec.pickups = append(rec.pickups, d)
					rec.mu.Unlock()
				}
			}
			time.Sleep(o.JobSleep)
			rec.handled.Add(1)
			return nil
		})
	if err != nil {
		return ingestPhase{}, err
	}
	w, err := inbox.NewWorker(workerPool, reg, inbox.WorkerConfig{Concurrency: workers, MessagesPerTx: perTx,
		ClaimBatch: o.ClaimBatch, Logger: discardLogger})
	if err != nil {
		return ingestPhase{}, err
	}
	// Goroutines inherit pprof labels: the worker's are "drain", the
	// producers' "ingest", so a CPU profile tells them apart.
	pprof.Do(ctx, pprof.Labels("side", "drain"), func(ctx context.Context) { err = w.Start(ctx) })
	if err != nil {
		return ingestPhase{}, err
	}
	workerStopped := false
	stopWorker := func() error {
		workerStopped = true
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return w.Stop(stopCtx)
	}
	defer func() {
		if !workerStopped {
			stopWorker()
		}
	}()

	feedCtx, stopFeeding := context.WithCancel(ctx)
	defer stopFeeding()
	target := &depthTarget{target: int64(o.JobBacklog)}
	var feeders sync.WaitGroup
	feeders.Add(1)
	go func() { // the depth poll
		defer feeders.Done()
		t := time.NewTicker(depthPollEvery)
		defer t.Stop()
		for {
			before := target.sent.Load()
			var due int64
			err := s.admin.QueryRow(feedCtx, `SELECT count(*) FROM pginbox_work
				WHERE consumer = $1 AND status IN ('PENDING', 'RETRYABLE') AND available_at <= now()`, benchConsumer).Scan(&due)
			if err != nil {
				if feedCtx.Err() == nil {
					rec.fail(fmt.Errorf("polling the backlog: %w", err))
				}
				return
			}
			target.due.Store(due)
			target.atPoll.Store(before)
			target.polled.Store(true)
			if rec.measuring.Load() {
				rec.mu.Lock()
				rec.depths = append(rec.depths, float64(due))
				rec.mu.Unlock()
			}
			select {
			case <-feedCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	var seq atomic.Int64
	tenants := make([]inbox.Scope, max(1, o.IngestTenants))
	for i := range tenants {
		tenants[i] = inbox.Tenant(benchTenant)
		if len(tenants) > 1 {
			tenants[i] = inbox.Tenant(fmt.Sprintf("%s-%02d", benchTenant, i))
		}
	}
	nextMessage := func(sentAt string) inbox.Message {
		i := int(seq.Add(1))
		m := message(fmt.Sprintf("ingest-%09d", i), i)
		m.Scope = tenants[i%len(tenants)]
		m.Metadata = map[string]string{acceptedAtKey: sentAt}
		return m
	}
	produce := func(ctx context.Context) {
		defer feeders.Done()
		batchMax := o.IngestBatch
		if via == viaAccept {
			batchMax = 1
		}
		msgs := make([]inbox.Message, 0, batchMax)
		for ctx.Err() == nil {
			n := target.reserve(batchMax)
			if n == 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			sentAt := strconv.FormatInt(time.Now().UnixMicro(), 10)
			msgs = msgs[:0]
			for range n {
				msgs = append(msgs, nextMessage(sentAt))
			}
			t0 := time.Now()
			ok, err := s.ingestCall(ctx, client, via, msgs)
			took := time.Since(t0)
			if err != nil {
				if ctx.Err() != nil {
					return // stopped while sending: not counted either way
				}
				rec.fail(err)
				return
			}
			rec.accepted.Add(int64(ok))
			rec.calls.Add(1)
			if rec.measuring.Load() {
				rec.mu.Lock()
				rec.callLatencies = append(rec.callLatencies, took)
				rec.mu.Unlock()
			}
		}
	}
	pprof.Do(feedCtx, pprof.Labels("side", "ingest"), func(ctx context.Context) {
		for range callers {
			feeders.Add(1)
			go produce(ctx)
		}
	})

	select { // warm-up: the backlog fills, claims and commits reach their pace
	case <-time.After(o.JobWarmup):
	case <-ctx.Done():
		return ingestPhase{}, ctx.Err()
	}
	if err := rec.err(); err != nil {
		return ingestPhase{}, err
	}
	phase := ingestPhase{loadStart: loadAverage()}
	sampleEvery := min(ingestSampleEvery, o.JobDuration/4)
	stopProfile := s.startProfile(profileName)
	begin := rec.handled.Load()
	acceptedBefore := rec.accepted.Load()
	stopProgress := s.prog.phase(label, 0, func() int { return int(rec.handled.Load() - begin) })
	rec.measuring.Store(true)
	start := time.Now()
	last, lastAt := begin, start
	tick := time.NewTicker(sampleEvery)
	for lastAt.Sub(start) < o.JobDuration-sampleEvery/2 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-tick.C:
			h := rec.handled.Load()
			phase.rates = append(phase.rates, float64(h-last)/now.Sub(lastAt).Seconds())
			last, lastAt = h, now
		}
	}
	tick.Stop()
	rec.measuring.Store(false)
	phase.window = lastAt.Sub(start)
	phase.completions = int(last - begin)
	phase.acceptedInWindow = int(rec.accepted.Load() - acceptedBefore)
	phase.completedAtEnd = int(last)
	stopProgress()
	stopProfile(phase.completions)
	phase.loadEnd = loadAverage()
	if err := ctx.Err(); err != nil {
		return ingestPhase{}, err
	}
	if err := s.admin.QueryRow(ctx, `SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables
		WHERE relname IN ('pginbox_receipts', 'pginbox_work')`).Scan(&phase.deadEnd); err != nil {
		return ingestPhase{}, fmt.Errorf("bench: reading dead tuples: %w", err)
	}

	stopFeeding()
	feeders.Wait()
	if err := stopWorker(); err != nil {
		return ingestPhase{}, err
	}
	if err := rec.err(); err != nil {
		return ingestPhase{}, err
	}
	rec.mu.Lock()
	phase.pickups, phase.callLatencies, phase.depths = rec.pickups, rec.callLatencies, rec.depths
	rec.mu.Unlock()
	phase.accepted, phase.calls, phase.handled = int(rec.accepted.Load()), int(rec.calls.Load()), int(rec.handled.Load())

	// Every accepted message is a receipt; every handler run committed (the
	// worker stopped cleanly), and nothing else completed.
	var receipts, completed int
	if err := s.admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED') FROM pginbox_receipts`).
		Scan(&receipts, &completed); err != nil {
		return ingestPhase{}, fmt.Errorf("bench: counting: %w", err)
	}
	if receipts < phase.accepted || receipts > phase.accepted+o.IngestBatch*callers {
		// Calls cut short by the stop may have committed unseen, no more.
		return ingestPhase{}, fmt.Errorf("%d messages accepted but %d receipts", phase.accepted, receipts)
	}
	if completed != phase.handled {
		return ingestPhase{}, fmt.Errorf("%d handler runs but %d COMPLETED receipts", phase.handled, completed)
	}
	return phase, nil
}
