package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// ScenarioCitus runs accept and batched drain on a three-node loopback
// Citus cluster (a coordinator and two workers) beside a single node, in
// the same run, and reports Citus's rate over the single node's. Every node
// shares this machine's CPUs, so the ratio is Citus's overhead, not its
// scaling. The cluster is measured twice: with every session through the
// coordinator (side "citus") and with the sessions on the worker nodes
// (side "nodes": inbox.Nodes for the Client and the Workers). Beside each
// phase a raw SQL loop writes the same number of rows of a plain table,
// colocated on Citus, on every side (on the nodes side, each row sent to
// its tenant's node): its ratio is what Citus allows any client on this
// machine. Each phase also reports, per node, transactions, statements,
// plans, rows written and CPU time per message, and the side's round trips
// (citus_costs.go), and the accept-batch and no-op drain phases add up to
// the cost per accepted and completed message (citus_model.go). It starts
// both clusters itself (DatabaseURL does not apply) and needs Citus
// installed in the PostgreSQL server.
const ScenarioCitus = "citus"

// The citus scenario's consumers.
const (
	citusAcceptConsumer = "bench.citus.accept" // no worker handles it: the accept phases' messages stay
	citusDrainConsumer  = "bench.citus"        // a business row per message
	citusNoopConsumer   = "bench.citus.noop"   // a handler that does nothing
)

// citusShared ends every citus description.
const citusShared = "All three Citus nodes and the single node run on this machine and share its CPUs: the ratio is Citus's overhead, not its scaling."

// citusSide is one side of the citus scenario: a cluster, its pool and a
// client.
type citusSide struct {
	name    string        // single, citus or nodes: the prefix of its figures
	tag     string        // its message IDs' prefix: the two Citus sides share a database
	pool    *pgxpool.Pool // on the side's server (the coordinator on Citus)
	client  *inbox.Client
	onNodes bool // the Client and the Workers run their sessions on the worker nodes
	trips   *roundTrips
	stop    func()
	meter   *costMeter

	closeNodes func() // closes the client's inbox.Nodes, if any

	// The raw loops' pools on the worker nodes and the node of each tenant
	// (the nodes side); nil: side.pool.
	rawPools []*pgxpool.Pool
	rawNode  map[string]int

	sent    int // messages accepted so far
	drained int // of them, for the business-row drains: every one COMPLETED after its drain
	noops   int // of them, for the no-op drains: likewise
	rawSent int // rows the raw loops wrote so far
}

// message is the side's message i, of tenant t (modulo the tenants).
func (side *citusSide) message(i, t int, tenants int, consumer string) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{Scope: inbox.Tenant(citusTenant(t, tenants)), Source: "bench",
			Consumer: consumer, MessageID: fmt.Sprint(side.tag, "-", i)},
		EventType: "bench.event", SchemaVersion: 1, Payload: map[string]any{"n": i},
	}
}

func citusTenant(t, tenants int) string { return fmt.Sprintf("tenant-%02d", t%tenants) }

// citus warms every side up, then measures accept, accept-batch, the
// batched drain at each DrainBatchedConcurrency and the no-op drain at
// each, alternating the sides over the rounds, and adds up the cost per
// accepted and completed message.
func (s *suite) citus(ctx context.Context) []*Result {
	fail := func(err error) []*Result {
		r := &Result{Scenario: "citus", Description: "Citus beside a single node", OK: true}
		r.failf("%v", err)
		return []*Result{r}
	}
	single, err := s.citusSingle(ctx)
	if err != nil {
		return fail(err)
	}
	defer single.stop()
	cit, nodes, err := s.citusCluster(ctx)
	if err != nil {
		return fail(err)
	}
	defer cit.stop()
	defer nodes.stop()
	sides := []*citusSide{single, cit, nodes}
	if err := s.citusWarmUp(ctx, sides); err != nil {
		return fail(err)
	}

	tenants := s.o.CitusTenants
	accept, _, _ := s.citusCompare(ctx, "citus-accept", s.o.Concurrency,
		fmt.Sprintf("Accept of fresh messages over %d tenants by %d callers, on Citus (coordinator + 2 workers, loopback; through the coordinator, and with the sessions on the worker nodes) vs one node. %s", tenants, s.o.Concurrency, citusShared),
		sides, func(ctx context.Context, side *citusSide) (sample, error) {
			base := side.sent
			side.sent += s.o.Calls
			if err := side.meter.begin(ctx); err != nil {
				return sample{}, err
			}
			sm := load(ctx, s.prog, "citus-accept "+side.name, s.o.Calls, s.o.Concurrency, 1, func(ctx context.Context, i int) error {
				_, err := side.client.Accept(ctx, side.message(base+i, i, tenants, citusAcceptConsumer))
				return err
			})
			return sm, side.meter.end(ctx, s.o.Calls)
		}, func(ctx context.Context, side *citusSide) sample {
			return s.citusRaw(ctx, side, "citus-accept raw "+side.name, s.o.Calls, s.o.Concurrency, 1, false)
		})
	res := []*Result{accept}

	batch, batchCosts, batchRaw := s.citusCompare(ctx, "citus-accept-batch", s.o.Concurrency,
		fmt.Sprintf("AcceptBatch of %d fresh messages of one tenant, %d calls by %d callers, round robin over %d tenants, on Citus vs one node. %s",
			s.o.BatchSize, s.o.Batches, s.o.Concurrency, tenants, citusShared),
		sides, func(ctx context.Context, side *citusSide) (sample, error) {
			return s.citusAcceptBatch(ctx, side)
		}, func(ctx context.Context, side *citusSide) sample {
			return s.citusRaw(ctx, side, "citus-accept-batch raw "+side.name, s.o.Batches, s.o.Concurrency, s.o.BatchSize, true)
		})
	res = append(res, batch)

	for _, c := range s.o.DrainBatchedConcurrency {
		r, _, _ := s.citusCompare(ctx, fmt.Sprintf("citus-drain-batched-c%d", c), c,
			fmt.Sprintf("Worker drain of %d due receipts over %d tenants, %d messages per handler transaction, a business row per message in a table colocated with the receipts, on Citus vs one node. %s",
				s.o.DrainMessages, tenants, s.o.DrainBatch, citusShared),
			sides, func(ctx context.Context, side *citusSide) (sample, error) {
				return s.citusDrain(ctx, side, c, false)
			}, func(ctx context.Context, side *citusSide) sample {
				return s.citusRaw(ctx, side, fmt.Sprintf("citus-drain-c%d raw %s", c, side.name), s.o.DrainMessages/s.o.DrainBatch, c, s.o.DrainBatch, false)
			})
		res = append(res, r)
	}
	var models []*Result
	for _, c := range s.o.DrainBatchedConcurrency {
		r, costs, raws := s.citusCompare(ctx, fmt.Sprintf("citus-drain-noop-c%d", c), c,
			fmt.Sprintf("Worker drain of %d due receipts over %d tenants, %d messages per handler transaction, a handler that does nothing, on Citus vs one node. %s",
				s.o.DrainMessages, tenants, s.o.DrainBatch, citusShared),
			sides, func(ctx context.Context, side *citusSide) (sample, error) {
				return s.citusDrain(ctx, side, c, true)
			}, func(ctx context.Context, side *citusSide) sample {
				return s.citusRaw(ctx, side, fmt.Sprintf("citus-drain-noop-c%d raw %s", c, side.name), s.o.DrainMessages/s.o.DrainBatch, c, s.o.DrainBatch, false)
			})
		res = append(res, r)
		models = append(models, s.citusModel(c, batch, r, batchCosts, costs, batchRaw, raws,
			fmt.Sprintf("CPU of each node per message accepted by AcceptBatch of %d (citus-accept-batch) and completed by a worker of concurrency %d, %d messages per transaction, no-op handler (citus-drain-noop-c%d), on one node, on Citus through the coordinator and on Citus with the sessions on the worker nodes. %s",
				s.o.BatchSize, c, s.o.DrainBatch, c, citusShared)))
	}
	return append(res, models...)
}

// citusWarmUp accepts a few messages on every side, untimed, so that the
// first measured phase does not pay for opening sessions: the node pools of
// inbox.Nodes and the coordinator's connections to the worker nodes open
// at first use.
func (s *suite) citusWarmUp(ctx context.Context, sides []*citusSide) error {
	n := s.o.Concurrency * s.o.CitusTenants
	for _, side := range sides {
		base := side.sent
		side.sent += n
		sm := load(ctx, nil, "", n, s.o.Concurrency, 1, func(ctx context.Context, i int) error {
			_, err := side.client.Accept(ctx, side.message(base+i, i, s.o.CitusTenants, citusAcceptConsumer))
			return err
		})
		if sm.errors > 0 {
			return fmt.Errorf("%s: warming up: %w", side.name, sm.firstErr)
		}
	}
	return nil
}

// citusCompare runs phase, then raw, on each side for every round and
// reports the Citus side through the coordinator (sides[1]) against the
// single node (sides[0]) as the "raw", with the nodes side (sides[2]) in
// Extra, and each raw loop's ratio beside them. It returns the sides'
// costs per message too, and their raw loops' per row.
func (s *suite) citusCompare(ctx context.Context, name string, conc int, desc string, sides []*citusSide,
	phase func(context.Context, *citusSide) (sample, error), raw func(context.Context, *citusSide) sample) (*Result, []sideCost, []sideCost) {
	r := &Result{Scenario: name, Description: desc, Concurrency: conc, Rounds: s.o.Rounds, OK: true,
		Target: "Citus >= 0.5 x the single node on the same machine (docs/TARGETS.md, target 14)"}
	samples, raws := make([]sample, len(sides)), make([]sample, len(sides))
	for _, side := range sides {
		side.meter.reset()
	}
	for range s.o.Rounds {
		for i, side := range sides {
			sm, err := phase(ctx, side)
			if err != nil {
				r.failf("%s: %v", side.name, err)
				return r, nil, nil
			}
			if sm.errors > 0 {
				r.failf("%s: %d calls failed, first: %v", side.name, sm.errors, sm.firstErr)
			}
			samples[i].add(sm)
			var rs sample
			if err := side.meter.raw(func() int {
				before := side.rawSent
				rs = raw(ctx, side)
				return side.rawSent - before
			}); err != nil {
				r.failf("%s raw: %v", side.name, err)
				return r, nil, nil
			}
			if rs.errors > 0 {
				r.failf("%s raw: %d calls failed, first: %v", side.name, rs.errors, rs.firstErr)
			}
			raws[i].add(rs)
		}
	}
	one, cit := samples[0].measure("single node"), samples[1].measure("Citus")
	r.Calls, r.Seconds, r.CallsPerSec = cit.Calls, cit.Seconds, cit.CallsPerSec
	r.P50Ms, r.P95Ms, r.P99Ms, r.Errors = cit.P50Ms, cit.P95Ms, cit.P99Ms, cit.Errors
	r.Raw = one
	r.Raw.Description = "the raw column is the single node (same machine, same settings, same pginbox calls), not a raw SQL loop; the Citus side with sessions on the worker nodes is nodes_* in the figures"
	r.Ratio = ratioOf(cit.CallsPerSec, one.CallsPerSec)
	r.MeetsTarget = r.Ratio >= 0.5
	r.Extra = map[string]float64{"single_per_sec": one.CallsPerSec, "citus_per_sec": cit.CallsPerSec}
	// The raw loop's ratio bounds what any client gets from Citus here;
	// pginbox's ratio over it is the part pginbox decides.
	rawOne := raws[0].measure("")
	r.setExtra("raw_single_per_sec", round2(rawOne.CallsPerSec))
	for i, side := range sides[1:] {
		got, rawGot := samples[i+1].measure(""), raws[i+1].measure("")
		ratio := ratioOf(got.CallsPerSec, one.CallsPerSec)
		r.setExtra("raw_"+side.name+"_per_sec", round2(rawGot.CallsPerSec))
		prefix := side.name + "_" // citus keeps its keys of before: ratio, raw_ratio, ratio_over_raw_ratio
		if side == sides[1] {
			prefix = ""
		} else {
			r.setExtra(side.name+"_per_sec", got.CallsPerSec)
			r.setExtra(side.name+"_ratio", round2(ratio))
		}
		if rr := ratioOf(rawGot.CallsPerSec, rawOne.CallsPerSec); rr > 0 {
			r.setExtra("raw_"+prefix+"ratio", rr)
			r.setExtra(prefix+"ratio_over_raw_ratio", round2(ratio/rr))
		}
	}
	var costs []sideCost
	for _, side := range sides {
		cost, lines := side.meter.report(r, side.name)
		costs = append(costs, cost)
		for _, line := range lines {
			s.prog.note("%s cost: %s", name, line)
		}
	}
	setCostExtras(r, costs)
	r.Notes = costNotes("CPU us per message by node, net of idle:", costs)
	var rawCosts []sideCost
	for _, side := range sides {
		rawCosts = append(rawCosts, side.meter.rawCost(side.name))
	}
	r.Notes = append(r.Notes, rawCostNote("raw loop, CPU us per row written, net of idle:", rawCosts, r))
	var counts []string
	for _, side := range sides {
		c, err := s.citusCount(ctx, side)
		if err != nil {
			r.failf("%s: counting: %v", side.name, err)
			continue
		}
		if c.receipts != side.sent || c.completed != side.drained || c.effects != c.completed || c.noops != side.noops || c.allCompleted != side.drained+side.noops {
			r.failf("%s: %d receipts for %d messages accepted; %d COMPLETED with %d business rows for %d drained; %d COMPLETED by the no-op handler for %d; %d COMPLETED in all",
				side.name, c.receipts, side.sent, c.completed, c.effects, side.drained, c.noops, side.noops, c.allCompleted)
		}
		if c.raw != side.rawSent {
			r.failf("%s: %d rows written by the raw loops, %d sent", side.name, c.raw, side.rawSent)
		}
		counts = append(counts, fmt.Sprintf("%s: %d receipts, %d COMPLETED, %d business rows, %d no-op COMPLETED, %d raw rows",
			side.name, c.receipts, c.completed, c.effects, c.noops, c.raw))
	}
	r.Verified = fmt.Sprint(counts)
	return r, costs, rawCosts
}

// citusCounts are a side's rows, told apart from the other Citus side's by
// the message IDs' prefix.
type citusCounts struct {
	receipts, completed, effects, noops, allCompleted, raw int
}

func (s *suite) citusCount(ctx context.Context, side *citusSide) (citusCounts, error) {
	var c citusCounts
	ids, rawIDs := side.tag+"-%", side.tag+"r-%"
	err := side.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pginbox_receipts WHERE message_id LIKE $1),
		(SELECT count(*) FROM pginbox_receipts WHERE message_id LIKE $1 AND status = 'COMPLETED' AND consumer = $3),
		(SELECT count(*) FROM bench_citus_effects WHERE message_id LIKE $1),
		(SELECT count(*) FROM pginbox_receipts WHERE message_id LIKE $1 AND status = 'COMPLETED' AND consumer = $4),
		(SELECT count(*) FROM pginbox_receipts WHERE message_id LIKE $1 AND status = 'COMPLETED'),
		(SELECT count(*) FROM bench_citus_raw WHERE message_id LIKE $2)`, ids, rawIDs, citusDrainConsumer, citusNoopConsumer).
		Scan(&c.receipts, &c.completed, &c.effects, &c.noops, &c.allCompleted, &c.raw)
	return c, err
}

// citusAcceptBatch accepts Batches batches of BatchSize fresh messages of
// one tenant each, the tenants in turn.
func (s *suite) citusAcceptBatch(ctx context.Context, side *citusSide) (sample, error) {
	base := side.sent
	side.sent += s.o.Batches * s.o.BatchSize
	if err := side.meter.begin(ctx); err != nil {
		return sample{}, err
	}
	sm := load(ctx, s.prog, "citus-accept-batch "+side.name, s.o.Batches, s.o.Concurrency, s.o.BatchSize, func(ctx context.Context, i int) error {
		msgs := make([]inbox.Message, s.o.BatchSize)
		for j := range msgs {
			msgs[j] = side.message(base+i*s.o.BatchSize+j, i, s.o.CitusTenants, citusAcceptConsumer)
		}
		items, err := side.client.AcceptBatch(ctx, msgs)
		if err != nil {
			return err
		}
		for j, it := range items {
			if it.Outcome != inbox.Accepted {
				return fmt.Errorf("item %d: %v, want accepted (%v)", j, it.Outcome, it.Err)
			}
		}
		return nil
	})
	return sm, side.meter.end(ctx, s.o.Batches*s.o.BatchSize)
}

// citusDrain accepts DrainMessages messages (not timed), then times a
// worker of concurrency c with MessagesPerTx DrainBatch until every one is
// handled and the worker stopped. Its handler writes a business row per
// message, or with noop nothing (every message handled once is then
// checked here). A smaller drain on the same pools goes first, untimed, so
// the measured one does not pay for opening sessions: the worker's node
// pools (inbox.Nodes) and the coordinator's connections to the workers
// open at first use.
func (s *suite) citusDrain(ctx context.Context, side *citusSide, c int, noop bool) (sample, error) {
	consumer, label := citusDrainConsumer, fmt.Sprintf("citus-drain-c%d %s", c, side.name)
	if noop {
		consumer, label = citusNoopConsumer, fmt.Sprintf("citus-drain-noop-c%d %s", c, side.name)
	}
	var handled atomic.Int64
	var mu sync.Mutex
	times := map[string]int{} // no-op: handler runs per message
	reg := handler.NewRegistry()
	err := reg.Register(handler.Key{Consumer: consumer, EventType: "bench.event", SchemaVersion: 1}, func(ctx context.Context, m *handler.Msg) error {
		if noop {
			mu.Lock()
			times[m.MessageID]++
			mu.Unlock()
			handled.Add(1)
			return nil
		}
		_, err := m.Tx.Exec(ctx, "INSERT INTO bench_citus_effects (scope_id, message_id) VALUES ($1, $2)", m.Scope.ID, m.MessageID)
		if err == nil {
			handled.Add(1)
		}
		return err
	})
	if err != nil {
		return sample{}, err
	}
	pool, err := newNamedPool(ctx, side.pool.Config(), c+2, "bench-citus-worker")
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	var nodes *inbox.Nodes
	if side.onNodes {
		// Its own, closed with the pool: node pools live as long as their
		// Nodes.
		if nodes, err = inbox.ConnectNodes(ctx, pool, inbox.NodesConfig{}); err != nil {
			return sample{}, err
		}
		defer nodes.Close()
	}

	// drain accepts n messages, then drains them with a new worker on the
	// pools, between begin and end when measured.
	total := 0 // messages accepted for the drains
	drain := func(n int, measured bool) (time.Duration, error) {
		base := side.sent
		side.sent += n
		total += n
		if noop {
			side.noops += n
		} else {
			side.drained += n
		}
		setup := load(ctx, nil, "", n, s.o.Concurrency, 1, func(ctx context.Context, i int) error {
			_, err := side.client.Accept(ctx, side.message(base+i, i, s.o.CitusTenants, consumer))
			return err
		})
		if setup.errors > 0 {
			return 0, fmt.Errorf("accepting the backlog: %w", setup.firstErr)
		}
		w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Concurrency: c, MessagesPerTx: s.o.DrainBatch, Logger: discardLogger,
			PollInterval: 50 * time.Millisecond, Nodes: nodes})
		if err != nil {
			return 0, err
		}
		handled.Store(0)
		stop := func() {}
		if measured {
			if err := side.meter.begin(ctx); err != nil {
				return 0, err
			}
			stop = s.prog.phase(label, n, func() int { return int(handled.Load()) })
		}
		t0 := time.Now()
		if err := w.Start(ctx); err != nil {
			stop()
			return 0, err
		}
		for handled.Load() < int64(n) && ctx.Err() == nil && time.Since(t0) < 10*time.Minute {
			time.Sleep(5 * time.Millisecond)
		}
		serr := w.Stop(context.WithoutCancel(ctx))
		elapsed := time.Since(t0)
		stop()
		if serr != nil {
			return 0, serr
		}
		if got := handled.Load(); got < int64(n) {
			return 0, fmt.Errorf("handled %d of %d messages", got, n)
		}
		return elapsed, nil
	}
	if _, err := drain(min(s.o.DrainMessages, 2*c*s.o.DrainBatch), false); err != nil {
		return sample{}, fmt.Errorf("warming up: %w", err)
	}
	elapsed, err := drain(s.o.DrainMessages, true)
	if err != nil {
		return sample{}, err
	}
	if noop {
		mu.Lock()
		for id, n := range times {
			if n != 1 {
				err = fmt.Errorf("message %s handled %d times", id, n)
			}
		}
		if len(times) != total {
			err = fmt.Errorf("%d messages handled, %d accepted", len(times), total)
		}
		mu.Unlock()
		if err != nil {
			return sample{}, err
		}
	}
	// The worker's sessions flush their statistics as they end.
	if nodes != nil {
		nodes.Close()
	}
	pool.Close()
	return sample{calls: s.o.DrainMessages, elapsed: elapsed}, side.meter.end(ctx, s.o.DrainMessages)
}
