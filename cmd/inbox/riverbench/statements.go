package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
)

// writeStatements writes what pg_stat_statements recorded in the phase's
// database since the window began, busiest first, per completed job too, in
// the columns of inbox bench's statement reports.
func writeStatements(ctx context.Context, pool *pgxpool.Pool, path string, jobs int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT calls, rows, total_exec_time, mean_exec_time,
			shared_blks_hit + shared_blks_read, wal_records, wal_bytes::bigint, left(regexp_replace(query, '\s+', ' ', 'g'), 100)
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 30`)
	if err != nil {
		return err
	}
	defer rows.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	per := func(v float64) string { return fmt.Sprintf("%.3f", v/float64(max(jobs, 1))) }
	fmt.Fprintf(f, "pg_stat_statements over the measured window: %d jobs completed\n\n", jobs)
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "calls\tcalls/job\trows\ttotal ms\tmean ms\tms/job\tbuffers\twal records\twal bytes\twal B/job\tstatement")
	for rows.Next() {
		var calls, n, blocks, wal, walBytes int64
		var total, mean float64
		var q string
		if err := rows.Scan(&calls, &n, &total, &mean, &blocks, &wal, &walBytes, &q); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.3f\t%s\t%d\t%d\t%d\t%s\t%s\n", calls, per(float64(calls)), n, total, mean, per(total), blocks, wal, walBytes, per(float64(walBytes)), q)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}
