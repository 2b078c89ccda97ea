package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"text/tabwriter"
)

// Application names of the bench's pools, so the server's views (wait
// events, backend CPU) tell ingest from drain.
const (
	appIngest = "pginbox-bench-ingest"
	appDrain  = "pginbox-bench-drain"
)

// startProfile profiles one phase (pginbox's, or a raw loop's to compare)
// when Options.ProfileDir is set: a CPU profile of this process (the worker
// and the producers, told apart by the pprof label "side"), the statements
// the server ran (pg_stat_statements, reset here), wait events sampled from
// pg_stat_activity, and the CPU time of this process, of each group of server
// backends and of the whole machine.
// The returned function ends the phase's profile; messages is how many it
// completed, for the per-message columns.
func (s *suite) startProfile(name string) (stop func(messages int)) {
	if s.o.ProfileDir == "" {
		return func(int) {}
	}
	base := filepath.Join(s.o.ProfileDir, name)
	f, err := os.Create(base + ".cpu.pprof")
	if err != nil {
		s.prog.note("profile: %v", err)
		return func(int) {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		s.prog.note("profile: %v", err)
		return func(int) {}
	}
	ctx := context.Background()
	s.admin.Exec(ctx, "SELECT pg_stat_statements_reset()") // the extension may be missing: reported at the end
	cpu := s.startCPUAccount(ctx)
	waits := s.startWaitSampler(ctx)
	return func(messages int) {
		pprof.StopCPUProfile()
		f.Close()
		w := waits()
		c := cpu()
		if err := writeWaits(base+".waits.txt", w); err != nil {
			s.prog.note("profile: %v", err)
		}
		if err := writeCPUAccount(base+".cpu.txt", c, messages); err != nil {
			s.prog.note("profile: %v", err)
		}
		if err := s.writeStatements(ctx, base+".statements.txt", messages); err != nil {
			s.prog.note("profile: %v", err)
		}
	}
}

// writeStatements writes what pg_stat_statements recorded since the profile
// began, the busiest statements first; messages (when > 0) adds per-message
// columns.
func (s *suite) writeStatements(ctx context.Context, path string, messages int) error {
	rows, err := s.admin.Query(ctx, `SELECT calls, rows, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3),
			plans, round(total_plan_time::numeric, 1),
			shared_blks_hit + shared_blks_read, wal_records, wal_bytes::bigint,
			coalesce(substring(query from '-- name: (\w+)'), left(regexp_replace(query, '\s+', ' ', 'g'), 100))
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 30`)
	if err != nil {
		return fmt.Errorf("pg_stat_statements (start the server with shared_preload_libraries = pg_stat_statements): %w", err)
	}
	defer rows.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	per := func(v float64) string {
		if messages <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", v/float64(messages))
	}
	fmt.Fprintf(f, "pg_stat_statements over the profiled window: %d messages completed\n\n", messages)
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	// Planning is counted apart from execution (track_planning): a
	// statement the server re-plans at every call pays it each time.
	fmt.Fprintln(tw, "calls\tcalls/msg\trows\ttotal ms\tmean ms\tms/msg\tplans\tplan ms/msg\tbuffers\twal records\twal bytes\twal B/msg\tstatement")
	for rows.Next() {
		var calls, nrows, plans, blocks, wal, walBytes int64
		var total, mean, planTotal float64
		var q string
		if err := rows.Scan(&calls, &nrows, &total, &mean, &plans, &planTotal, &blocks, &wal, &walBytes, &q); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.3f\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", calls, per(float64(calls)), nrows, total, mean,
			per(total), plans, per(planTotal), blocks, wal, walBytes, per(float64(walBytes)), q)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}
