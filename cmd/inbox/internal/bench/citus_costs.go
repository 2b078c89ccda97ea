package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/internal/pgcluster"
)

// The citus scenario's cost account: per node (the single node; the Citus
// coordinator and each worker), what a phase cost in transactions committed,
// statements executed, rows written and CPU time of the node's postgres
// processes (docs/SCALE-OUT.md, "Cost per message"; figures in BENCHMARKS.md).

// citusStatsSettle is how long the cost account waits before reading a
// node's counters: a backend flushes its pg_stat_database counts when it
// goes idle, at most once a second, and an idle one only after 10 s. (A
// variable: the scenario's test shortens it and checks statements only,
// which pg_stat_statements counts at once.)
var citusStatsSettle = 11 * time.Second

// citusStatsSettings load pg_stat_statements in the scenario's nodes
// (statements executed per node, utility statements such as BEGIN, COMMIT
// and PREPARE TRANSACTION included, and the plans made for them; top-level
// statements only, so a function's own statements are not counted).
func citusStatsSettings(preload string) map[string]string {
	return map[string]string{"shared_preload_libraries": preload, "pg_stat_statements.track_utility": "on",
		"pg_stat_statements.track_planning": "on"}
}

// costNode is one node of a side, read through its postgres database (so
// the reads do not count in the bench database's figures).
type costNode struct {
	name    string
	cluster *pgcluster.Cluster
	conn    *pgx.Conn
}

// nodeCounters are a node's cumulative counters for the bench database.
type nodeCounters struct {
	xacts, rows, stmts, plans, sessions int64
	byQuery                             map[string]int64
	msByQuery                           map[string]float64 // planning and execution time
	cpu                                 time.Duration
}

// nodeCost is what a node did over the measured part of a phase, summed
// over the rounds.
type nodeCost struct {
	xacts, rows, stmts, plans, sessions int64
	byQuery                             map[string]int64
	msByQuery                           map[string]float64
	cpu                                 time.Duration
}

// openCostNodes connects to each node's postgres database and creates
// pg_stat_statements there.
func openCostNodes(ctx context.Context, names []string, clusters []*pgcluster.Cluster) ([]*costNode, error) {
	var nodes []*costNode
	for i, c := range clusters {
		conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
		if err != nil {
			closeCostNodes(nodes)
			return nil, fmt.Errorf("bench: cost account: %s: %w", names[i], err)
		}
		nodes = append(nodes, &costNode{name: names[i], cluster: c, conn: conn})
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			closeCostNodes(nodes)
			return nil, fmt.Errorf("bench: cost account: %s: %w", names[i], err)
		}
	}
	return nodes, nil
}

func closeCostNodes(nodes []*costNode) {
	for _, n := range nodes {
		n.conn.Close(context.Background())
	}
}

// read returns the node's counters for database db now.
func (n *costNode) read(ctx context.Context, db string) (nodeCounters, error) {
	c := nodeCounters{byQuery: map[string]int64{}, msByQuery: map[string]float64{}}
	err := n.conn.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, sessions
		FROM pg_stat_database WHERE datname = $1`, db).Scan(&c.xacts, &c.rows, &c.sessions)
	if err != nil {
		return c, fmt.Errorf("%s: pg_stat_database: %w", n.name, err)
	}
	rows, err := n.conn.Query(ctx, `SELECT s.query, sum(s.calls)::bigint, sum(s.plans)::bigint,
		sum(s.total_exec_time + s.total_plan_time)::float8 FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 GROUP BY s.query`, db)
	if err != nil {
		return c, fmt.Errorf("%s: pg_stat_statements: %w", n.name, err)
	}
	for rows.Next() {
		var q string
		var calls, plans int64
		var ms float64
		if err := rows.Scan(&q, &calls, &plans, &ms); err != nil {
			rows.Close()
			return c, err
		}
		q = statementLabel(q)
		c.byQuery[q] += calls
		c.msByQuery[q] += ms
		c.stmts += calls
		c.plans += plans
	}
	if err := rows.Err(); err != nil {
		return c, err
	}
	c.cpu, err = n.cpu()
	return c, err
}

// cpu returns the CPU time the node's postgres processes used so far.
func (n *costNode) cpu() (time.Duration, error) {
	d, err := serverCPU(int32(n.cluster.Pid()))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", n.name, err)
	}
	return d, nil
}

// shardSuffix is a Citus shard's number at the end of a table name.
var shardSuffix = regexp.MustCompile(`_[0-9]{6,}\b`)

// statementLabel shortens a normalized statement to a one-line label.
func statementLabel(q string) string {
	q = shardSuffix.ReplaceAllString(strings.Join(strings.Fields(q), " "), "_<shard>")
	if len(q) > 110 {
		q = q[:110] + "..."
	}
	return q
}

// costMeter accumulates a side's per-node costs over a phase's rounds.
type costMeter struct {
	db      string
	nodes   []*costNode
	trips   *roundTrips // the side's pools' round trips
	start   []nodeCounters
	startAt time.Time
	sum     []nodeCost
	msgs    int
	wall    time.Duration // of the measured parts of the phase

	tripsStart, tripsSum int64

	// The nodes' CPU time while idle (Citus's maintenance daemon and
	// deadlock detector, autovacuum), measured while the counters settle
	// before each measured part: the phase's figures are net of it.
	idle     []time.Duration
	idleWall time.Duration

	// The raw loops' CPU by node and the rows they wrote: the same-run
	// floor of what a routed write costs each side.
	rawCPU  []time.Duration
	rawWall time.Duration
	rawRows int
}

// reset starts a new phase.
func (m *costMeter) reset() {
	m.sum = make([]nodeCost, len(m.nodes))
	for i := range m.sum {
		m.sum[i].byQuery = map[string]int64{}
		m.sum[i].msByQuery = map[string]float64{}
	}
	m.msgs, m.wall, m.tripsSum = 0, 0, 0
	m.idle, m.idleWall = make([]time.Duration, len(m.nodes)), 0
	m.rawCPU, m.rawWall, m.rawRows = make([]time.Duration, len(m.nodes)), 0, 0
}

// raw runs a raw loop and adds the nodes' CPU over it to the raw account.
// Only CPU is read, which is current, so it needs no wait for counters.
func (m *costMeter) raw(loop func() (rows int)) error {
	c0, err := m.cpus()
	if err != nil {
		return err
	}
	t0 := time.Now()
	rows := loop()
	c1, err := m.cpus()
	if err != nil {
		return err
	}
	m.rawWall += time.Since(t0)
	for i := range m.nodes {
		m.rawCPU[i] += c1[i] - c0[i]
	}
	m.rawRows += rows
	return nil
}

// idleRate is node i's idle CPU per second of wall time.
func (m *costMeter) idleRate(i int) float64 {
	if m.idleWall < time.Second { // shorter, a single clock tick would swamp it
		return 0
	}
	return float64(m.idle[i]) / float64(m.idleWall)
}

// rawCost is the raw loops' CPU per row written, by node, net of idle.
func (m *costMeter) rawCost(side string) sideCost {
	cost := sideCost{side: side}
	if m.rawRows == 0 {
		return cost
	}
	for i, n := range m.nodes {
		net := m.rawCPU[i] - time.Duration(m.idleRate(i)*float64(m.rawWall))
		cost.nodes = append(cost.nodes, nodeShare{name: n.name, cpuUs: float64(net.Microseconds()) / float64(m.rawRows)})
	}
	return cost
}

func (m *costMeter) cpus() ([]time.Duration, error) {
	out := make([]time.Duration, len(m.nodes))
	for i, n := range m.nodes {
		var err error
		if out[i], err = n.cpu(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// begin waits for the counters to settle and reads them.
func (m *costMeter) begin(ctx context.Context) error {
	idle0, err := m.cpus()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, citusStatsSettle); err != nil {
		return err
	}
	m.start = make([]nodeCounters, len(m.nodes))
	for i, n := range m.nodes {
		c, err := n.read(ctx, m.db)
		if err != nil {
			return err
		}
		m.start[i] = c
		m.idle[i] += c.cpu - idle0[i]
	}
	m.idleWall += time.Since(t0)
	m.startAt = time.Now()
	m.tripsStart = m.trips.count()
	return nil
}

// end waits for the counters to settle, reads them and adds the difference
// since begin, for msgs messages, to the phase's sums.
func (m *costMeter) end(ctx context.Context, msgs int) error {
	cpus, err := m.cpus() // CPU times are current; only the counters need the wait
	if err != nil {
		return err
	}
	m.wall += time.Since(m.startAt)
	m.tripsSum += m.trips.count() - m.tripsStart
	if err := sleepCtx(ctx, citusStatsSettle); err != nil {
		return err
	}
	for i, n := range m.nodes {
		c, err := n.read(ctx, m.db)
		if err != nil {
			return err
		}
		b, s := m.start[i], &m.sum[i]
		s.xacts += c.xacts - b.xacts
		s.rows += c.rows - b.rows
		s.stmts += c.stmts - b.stmts
		s.plans += c.plans - b.plans
		s.sessions += c.sessions - b.sessions
		s.cpu += cpus[i] - b.cpu
		for q, calls := range c.byQuery {
			if d := calls - b.byQuery[q]; d > 0 {
				s.byQuery[q] += d
			}
		}
		for q, ms := range c.msByQuery {
			if d := ms - b.msByQuery[q]; d > 0 {
				s.msByQuery[q] += d
			}
		}
	}
	m.msgs += msgs
	return nil
}

// report adds the phase's per-message figures of each node to r.Extra,
// keyed <side>_<node>_<figure>_per_msg, and returns them as a sideCost
// with the per-statement breakdown as lines (each node's statements by
// calls per message, with their share of the node's statement time).
func (m *costMeter) report(r *Result, side string) (sideCost, []string) {
	cost := sideCost{side: side}
	if m.msgs == 0 {
		return cost, nil
	}
	per := func(n int64) float64 { return float64(n) / float64(m.msgs) }
	usPer := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds()) / float64(m.msgs)) }
	cost.trips = per(m.tripsSum)
	var lines []string
	for i, n := range m.nodes {
		s := m.sum[i]
		key := side + "_" + n.name
		idleRate := m.idleRate(i)
		net := s.cpu - time.Duration(idleRate*float64(m.wall))
		cost.nodes = append(cost.nodes, nodeShare{name: n.name, cpuUs: float64(net.Microseconds()) / float64(m.msgs),
			stmts: per(s.stmts), plans: per(s.plans)})
		r.setExtra(key+"_xacts_per_msg", round2(per(s.xacts)))
		r.setExtra(key+"_rows_per_msg", round2(per(s.rows)))
		r.setExtra(key+"_sessions_per_msg", round2(per(s.sessions)))
		r.setExtra(key+"_gross_cpu_us_per_msg", usPer(s.cpu))
		r.setExtra(key+"_idle_cpu_ms_per_s", round2(idleRate*1000))
		lines = append(lines, fmt.Sprintf("%s %s: %d messages in %.1fs: %.2f xacts, %.2f statements, %.2f plans, %.2f rows written, %.3f sessions opened, "+
			"%.0f CPU us per message net of %.1f CPU ms/s idle (%.0f gross)",
			side, n.name, m.msgs, m.wall.Seconds(), per(s.xacts), per(s.stmts), per(s.plans), per(s.rows), per(s.sessions), usPer(net), idleRate*1000, usPer(s.cpu)))
		qs := slices.Collect(maps.Keys(s.byQuery))
		slices.SortFunc(qs, func(a, b string) int { return cmp.Or(cmp.Compare(s.byQuery[b], s.byQuery[a]), cmp.Compare(a, b)) })
		var allMs float64
		for _, ms := range s.msByQuery {
			allMs += ms
		}
		for _, q := range qs {
			if per(s.byQuery[q]) >= 0.005 {
				share := 0.0
				if allMs > 0 {
					share = 100 * s.msByQuery[q] / allMs
				}
				// The share of the node's statement time (planning and
				// execution) says which statement its work goes to, such as
				// the claim's discovery.
				lines = append(lines, fmt.Sprintf("    %7.3f  %5.1f%%  %s", per(s.byQuery[q]), share, q))
			}
		}
	}
	lines = append(lines, fmt.Sprintf("%s: %.3f round trips per message from the client", side, cost.trips))
	return cost, lines
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// serverCPU returns the user + system CPU time of a postmaster (pid) and
// its processes: the postmaster's own, its live children's, and that of the
// children it has reaped (which the kernel adds to its cutime and cstime).
// A child reaped while the children are read would be in neither sum (or
// in both), so the read repeats until the postmaster's reaped time is the
// same before and after it: the drain's backends end as its pool closes.
func serverCPU(pid int32) (time.Duration, error) {
	for range 100 {
		before, err := procStat(pid)
		if err != nil {
			return 0, fmt.Errorf("bench: CPU time of postmaster %d: %w", pid, err)
		}
		children, err := childrenCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("bench: CPU time of postmaster %d: %w", pid, err)
		}
		after, err := procStat(pid)
		if err != nil {
			return 0, fmt.Errorf("bench: CPU time of postmaster %d: %w", pid, err)
		}
		if after.cutime+after.cstime == before.cutime+before.cstime {
			return (after.utime + after.stime + after.cutime + after.cstime + children) * time.Second / clockTicks, nil
		}
	}
	return 0, fmt.Errorf("bench: CPU time of postmaster %d: its children kept ending during 100 reads", pid)
}

// childrenCPU returns the CPU time, in clock ticks, of pid's live children.
func childrenCPU(pid int32) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, e := range entries {
		child, err := strconv.ParseInt(e.Name(), 10, 32)
		if err != nil || int32(child) == pid {
			continue
		}
		st, err := procStat(int32(child))
		if err != nil || st.ppid != pid {
			continue // gone meanwhile, or not the postmaster's
		}
		// Postgres backends do not fork, so grandchildren need no walk.
		total += st.utime + st.stime
	}
	return total, nil
}

// statFields are the fields of /proc/PID/stat that serverCPU needs, the
// times in clock ticks.
type statFields struct {
	ppid                         int32
	utime, stime, cutime, cstime time.Duration
}

func procStat(pid int32) (statFields, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return statFields{}, err
	}
	// The command name is in parentheses and may hold spaces: fields start after ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return statFields{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return statFields{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 of the file (state): ppid is field 4, utime 14,
	// stime 15, cutime 16, cstime 17.
	var n [5]int64
	for j, k := range []int{1, 11, 12, 13, 14} {
		if n[j], err = strconv.ParseInt(f[k], 10, 64); err != nil {
			return statFields{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return statFields{ppid: int32(n[0]), utime: time.Duration(n[1]), stime: time.Duration(n[2]),
		cutime: time.Duration(n[3]), cstime: time.Duration(n[4])}, nil
}
