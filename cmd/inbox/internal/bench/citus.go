package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

// ScenarioCitus runs accept and batched drain on a three-node loopback
// Citus cluster (a coordinator and two workers) beside a single node, in
// the same run, and reports Citus's rate over the single node's. Every node
// shares this machine's CPUs, so the ratio is Citus's overhead, not its
// scaling. Beside each phase a raw SQL loop writes the same number of rows
// of a plain table, colocated on Citus, on both sides: its ratio is what
// Citus allows any client on this machine. Each phase also reports, per
// node, transactions, statements, rows written and CPU time per message
// (citus_costs.go). It starts both clusters itself (DatabaseURL does not
// apply) and needs Citus installed in the PostgreSQL server.
const ScenarioCitus = "citus"

// citusSide is one side of the citus scenario: a cluster, its pool and a
// client.
type citusSide struct {
	name    string
	pool    *pgxpool.Pool
	client  *inbox.Client
	stop    func()
	sent    int // messages accepted so far (message IDs are unique per side)
	rawSent int // rows the raw loops wrote so far
	meter   *costMeter
}

// citus measures accept, then batched drain at each DrainBatchedConcurrency,
// alternating the sides over the rounds.
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
	cit, err := s.citusCluster(ctx)
	if err != nil {
		return fail(err)
	}
	defer cit.stop()
	sides := []*citusSide{single, cit}

	const shared = "All three Citus nodes and the single node run on this machine and share its CPUs: the ratio is Citus's overhead, not its scaling."
	res := []*Result{s.citusCompare(ctx, "citus-accept", s.o.Concurrency,
		fmt.Sprintf("Accept of fresh messages over %d tenants by %d callers, on Citus (coordinator + 2 workers, loopback) vs one node. %s", s.o.CitusTenants, s.o.Concurrency, shared),
		sides, func(ctx context.Context, side *citusSide) (sample, error) {
			base := side.sent
			side.sent += s.o.Calls
			if err := side.meter.begin(ctx); err != nil {
				return sample{}, err
			}
			sm := load(ctx, s.prog, "citus-accept "+side.name, s.o.Calls, s.o.Concurrency, 1, func(ctx context.Context, i int) error {
				m := citusMessage(base+i, s.o.CitusTenants)
				m.Consumer = "bench.citus.accept" // no handler: the drains leave them
				_, err := side.client.Accept(ctx, m)
				return err
			})
			return sm, side.meter.end(ctx, s.o.Calls)
		}, func(ctx context.Context, side *citusSide) sample {
			return s.citusRaw(ctx, side, "citus-accept raw "+side.name, s.o.Calls, s.o.Concurrency, 1)
		})}
	for _, c := range s.o.DrainBatchedConcurrency {
		res = append(res, s.citusCompare(ctx, fmt.Sprintf("citus-drain-batched-c%d", c), c,
			fmt.Sprintf("Worker drain of %d due receipts over %d tenants, %d messages per handler transaction, a business row per message in a table colocated with the receipts, on Citus vs one node. %s",
				s.o.DrainMessages, s.o.CitusTenants, s.o.DrainBatch, shared),
			sides, func(ctx context.Context, side *citusSide) (sample, error) {
				return s.citusDrain(ctx, side, c)
			}, func(ctx context.Context, side *citusSide) sample {
				return s.citusRaw(ctx, side, fmt.Sprintf("citus-drain-c%d raw %s", c, side.name), s.o.DrainMessages/s.o.DrainBatch, c, s.o.DrainBatch)
			}))
	}
	return res
}

// citusCompare runs phase, then raw, on each side for every round and
// reports the Citus side (sides[1]) against the single node (sides[0]) as
// the "raw", and raw's own ratio beside it.
func (s *suite) citusCompare(ctx context.Context, name string, conc int, desc string, sides []*citusSide,
	phase func(context.Context, *citusSide) (sample, error), raw func(context.Context, *citusSide) sample) *Result {
	r := &Result{Scenario: name, Description: desc, Concurrency: conc, Rounds: s.o.Rounds, OK: true,
		Target: "Citus >= 0.5 x the single node on the same machine (issue 22)"}
	samples, raws := make([]sample, len(sides)), make([]sample, len(sides))
	for _, side := range sides {
		side.meter.reset()
	}
	for range s.o.Rounds {
		for i, side := range sides {
			sm, err := phase(ctx, side)
			if err != nil {
				r.failf("%s: %v", side.name, err)
				return r
			}
			if sm.errors > 0 {
				r.failf("%s: %d calls failed, first: %v", side.name, sm.errors, sm.firstErr)
			}
			samples[i].add(sm)
			rs := raw(ctx, side)
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
	r.Raw.Description = "the raw column is the single node (same machine, same settings, same pginbox calls), not a raw SQL loop"
	r.Ratio = ratioOf(cit.CallsPerSec, one.CallsPerSec)
	r.MeetsTarget = r.Ratio >= 0.5
	r.Extra = map[string]float64{"single_per_sec": one.CallsPerSec, "citus_per_sec": cit.CallsPerSec}
	// The raw loop's ratio bounds what any client gets from Citus here;
	// pginbox's ratio over it is the part pginbox decides.
	rawOne, rawCit := raws[0].measure(""), raws[1].measure("")
	r.setExtra("raw_single_per_sec", round2(rawOne.CallsPerSec))
	r.setExtra("raw_citus_per_sec", round2(rawCit.CallsPerSec))
	if rr := ratioOf(rawCit.CallsPerSec, rawOne.CallsPerSec); rr > 0 {
		r.setExtra("raw_ratio", rr)
		r.setExtra("ratio_over_raw_ratio", round2(r.Ratio/rr))
	}
	for _, side := range sides {
		for _, line := range side.meter.report(r, side.name) {
			s.prog.note("%s cost: %s", name, line)
		}
	}
	var counts []string
	for _, side := range sides {
		var receipts, completed, effects, rawRows int
		err := side.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pginbox_receipts),
			(SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'), (SELECT count(*) FROM bench_citus_effects),
			(SELECT count(*) FROM bench_citus_raw)`).Scan(&receipts, &completed, &effects, &rawRows)
		if err != nil {
			r.failf("%s: counting: %v", side.name, err)
			continue
		}
		if receipts != side.sent || effects != completed || (strings.HasPrefix(name, "citus-drain") && completed != side.sent-s.o.Calls*s.o.Rounds) {
			r.failf("%s: %d receipts for %d messages accepted, %d COMPLETED with %d business rows", side.name, receipts, side.sent, completed, effects)
		}
		if rawRows != side.rawSent {
			r.failf("%s: %d rows written by the raw loops, %d sent", side.name, rawRows, side.rawSent)
		}
		counts = append(counts, fmt.Sprintf("%s: %d receipts, %d COMPLETED, %d business rows, %d raw rows", side.name, receipts, completed, effects, rawRows))
	}
	r.Verified = fmt.Sprint(counts)
	return r
}

// citusDrain accepts DrainMessages messages (not timed), then times a
// worker of concurrency c with MessagesPerTx DrainBatch until every one is
// handled and the worker stopped.
func (s *suite) citusDrain(ctx context.Context, side *citusSide, c int) (sample, error) {
	base := side.sent
	side.sent += s.o.DrainMessages
	setup := load(ctx, nil, "", s.o.DrainMessages, s.o.Concurrency, 1, func(ctx context.Context, i int) error {
		_, err := side.client.Accept(ctx, citusMessage(base+i, s.o.CitusTenants))
		return err
	})
	if setup.errors > 0 {
		return sample{}, fmt.Errorf("accepting the backlog: %w", setup.firstErr)
	}
	var handled atomic.Int64
	reg := handler.NewRegistry()
	err := reg.Register(handler.Key{Consumer: "bench.citus", EventType: "bench.event", SchemaVersion: 1}, func(ctx context.Context, m *handler.Msg) error {
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
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Concurrency: c, MessagesPerTx: s.o.DrainBatch, Logger: discardLogger,
		PollInterval: 50 * time.Millisecond})
	if err != nil {
		return sample{}, err
	}
	if err := side.meter.begin(ctx); err != nil {
		return sample{}, err
	}
	stop := s.prog.phase(fmt.Sprintf("citus-drain-c%d %s", c, side.name), s.o.DrainMessages, func() int { return int(handled.Load()) })
	t0 := time.Now()
	if err := w.Start(ctx); err != nil {
		stop()
		return sample{}, err
	}
	for handled.Load() < int64(s.o.DrainMessages) && ctx.Err() == nil && time.Since(t0) < 10*time.Minute {
		time.Sleep(5 * time.Millisecond)
	}
	serr := w.Stop(context.WithoutCancel(ctx))
	elapsed := time.Since(t0)
	stop()
	if serr != nil {
		return sample{}, serr
	}
	if n := handled.Load(); n < int64(s.o.DrainMessages) {
		return sample{}, fmt.Errorf("handled %d of %d messages", n, s.o.DrainMessages)
	}
	pool.Close() // the worker's sessions flush their statistics as they end
	return sample{calls: s.o.DrainMessages, elapsed: elapsed}, side.meter.end(ctx, s.o.DrainMessages)
}

// citusRaw is the raw loop beside a phase: calls transactions from workers
// callers, each writing perTx rows of one tenant into bench_citus_raw, one
// statement per row as a handler would, then committing. With perTx 1 it
// is one plain INSERT per commit, the cheapest durable write Citus routes.
func (s *suite) citusRaw(ctx context.Context, side *citusSide, label string, calls, workers, perTx int) sample {
	base := side.rawSent
	side.rawSent += calls * perTx
	return load(ctx, s.prog, label, calls, workers, perTx, func(ctx context.Context, i int) error {
		scope := fmt.Sprintf("tenant-%02d", i%s.o.CitusTenants)
		const insert = "INSERT INTO bench_citus_raw (scope_id, message_id) VALUES ($1, $2)"
		if perTx == 1 {
			_, err := side.pool.Exec(ctx, insert, scope, fmt.Sprint("r-", base+i))
			return err
		}
		return pgx.BeginFunc(ctx, side.pool, func(tx pgx.Tx) error {
			for j := range perTx {
				if _, err := tx.Exec(ctx, insert, scope, fmt.Sprint("r-", base+i*perTx+j)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// citusMessage is the citus scenario's message i.
func citusMessage(i, tenants int) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{Scope: inbox.Tenant(fmt.Sprintf("tenant-%02d", i%tenants)), Source: "bench",
			Consumer: "bench.citus", MessageID: fmt.Sprint("m-", i)},
		EventType: "bench.event", SchemaVersion: 1, Payload: map[string]any{"n": i},
	}
}

// citusSingle starts the single-node side: a cluster with the bench's
// settings, pginbox's schema and the business table.
func (s *suite) citusSingle(ctx context.Context) (*citusSide, error) {
	s.prog.note("citus: starting a single node beside the Citus cluster (fsync %s)", onOff(!s.o.NoFsync))
	c, err := pgcluster.Start(ctx, pgcluster.Options{Fsync: !s.o.NoFsync, Settings: citusStatsSettings("pg_stat_statements")})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := createDatabase(ctx, c.ConnString("postgres"), "pginbox_bench"); err != nil {
		c.Stop()
		return nil, err
	}
	dsn := c.ConnString("pginbox_bench")
	if err := schema.UpDSN(ctx, dsn); err != nil {
		c.Stop()
		return nil, fmt.Errorf("bench: %w", err)
	}
	side, err := s.citusOpen(ctx, "single", dsn, `CREATE TABLE bench_citus_effects (scope_id text NOT NULL, message_id text NOT NULL);
		CREATE TABLE bench_citus_raw (scope_id text NOT NULL, message_id text NOT NULL, PRIMARY KEY (scope_id, message_id))`)
	if err != nil {
		c.Stop()
		return nil, err
	}
	nodes, err := openCostNodes(ctx, []string{"node"}, []*pgcluster.Cluster{c})
	if err != nil {
		side.pool.Close()
		c.Stop()
		return nil, err
	}
	side.meter = &costMeter{db: "pginbox_bench", nodes: nodes}
	side.stop = func() { side.pool.Close(); closeCostNodes(nodes); c.Stop() }
	return side, nil
}

// citusCluster starts the Citus side: a coordinator and two workers with
// the bench's settings, pginbox's Citus schema and the business table
// colocated with pginbox's.
func (s *suite) citusCluster(ctx context.Context) (*citusSide, error) {
	s.prog.note("citus: starting a Citus cluster (coordinator + 2 workers on 127.0.0.1, fsync %s)", onOff(!s.o.NoFsync))
	c, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{Node: pgcluster.Options{Fsync: !s.o.NoFsync,
		Settings: citusStatsSettings("citus,pg_stat_statements")}})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := c.CreateDatabase(ctx, "pginbox_bench"); err != nil {
		c.Stop()
		return nil, fmt.Errorf("bench: %w", err)
	}
	dsn := c.ConnString("pginbox_bench")
	if _, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{}); err != nil {
		c.Stop()
		return nil, fmt.Errorf("bench: %w", err)
	}
	side, err := s.citusOpen(ctx, "citus", dsn, `CREATE TABLE bench_citus_effects (scope_id text NOT NULL, message_id text NOT NULL);
		SELECT create_distributed_table('bench_citus_effects', 'scope_id', colocate_with => 'pginbox_receipts');
		CREATE TABLE bench_citus_raw (scope_id text NOT NULL, message_id text NOT NULL, PRIMARY KEY (scope_id, message_id));
		SELECT create_distributed_table('bench_citus_raw', 'scope_id', colocate_with => 'pginbox_receipts')`)
	if err != nil {
		c.Stop()
		return nil, err
	}
	names := []string{"coordinator"}
	for i := range c.Workers {
		names = append(names, fmt.Sprintf("worker%d", i+1))
	}
	nodes, err := openCostNodes(ctx, names, c.Nodes())
	if err != nil {
		side.pool.Close()
		c.Stop()
		return nil, err
	}
	side.meter = &costMeter{db: "pginbox_bench", nodes: nodes}
	side.stop = func() { side.pool.Close(); closeCostNodes(nodes); c.Stop() }
	return side, nil
}

// citusOpen opens a side's pool and client and runs ddl.
func (s *suite) citusOpen(ctx context.Context, name, dsn, ddl string) (*citusSide, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	pool, err := newNamedPool(ctx, cfg, s.o.Concurrency+2, "bench-citus-"+name)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &citusSide{name: name, pool: pool, client: client}, nil
}
