package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"text/tabwriter"
)

// startProfile profiles one pginbox phase when Options.ProfileDir is set: a CPU
// profile of this process (the worker, the client) and, where the server has
// pg_stat_statements, the statements it ran, with calls, rows and time. It
// returns the function that ends the phase's profile.
func (s *suite) startProfile(name string) (stop func()) {
	if s.o.ProfileDir == "" {
		return func() {}
	}
	base := filepath.Join(s.o.ProfileDir, name)
	f, err := os.Create(base + ".cpu.pprof")
	if err != nil {
		s.prog.note("profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		s.prog.note("profile: %v", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if err := s.writeStatements(context.Background(), base+".statements.txt"); err != nil {
			s.prog.note("profile: %v", err)
		}
	}
}

// writeStatements writes what pg_stat_statements recorded since the phase
// began, the busiest statements first.
func (s *suite) writeStatements(ctx context.Context, path string) error {
	rows, err := s.admin.Query(ctx, `SELECT calls, rows, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3),
			shared_blks_hit + shared_blks_read, wal_records, left(regexp_replace(query, '\\s+', ' ', 'g'), 160)
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 25`)
	if err != nil {
		return fmt.Errorf("pg_stat_statements (start the server with shared_preload_libraries = pg_stat_statements): %w", err)
	}
	defer rows.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "calls\trows\ttotal ms\tmean ms\tbuffers\twal records\tquery")
	for rows.Next() {
		var calls, nrows, blocks, wal int64
		var total, mean float64
		var q string
		if err := rows.Scan(&calls, &nrows, &total, &mean, &blocks, &wal, &q); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.3f\t%d\t%d\t%s\n", calls, nrows, total, mean, blocks, wal, q)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}
