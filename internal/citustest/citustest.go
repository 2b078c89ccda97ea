// Package citustest holds what pginbox's Citus tests share: a pool whose
// connections log every command Citus sends to the worker nodes, and the
// node that holds a scope's shard.
package citustest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RemoteCommands collects what Citus sends to the worker nodes
// (citus.log_remote_commands): one "command @ node" line each.
type RemoteCommands struct {
	mu    sync.Mutex
	lines []string
}

func (r *RemoteCommands) add(_ *pgconn.PgConn, n *pgconn.Notice) {
	if !strings.HasPrefix(n.Message, "issuing ") {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, strings.TrimPrefix(n.Message, "issuing ")+" @ "+n.Detail)
}

// Reset forgets the lines collected so far (a test's own set-up).
func (r *RemoteCommands) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = nil
}

// Lines returns every line collected so far.
func (r *RemoteCommands) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Matching returns the lines that contain every one of subs.
func (r *RemoteCommands) Matching(subs ...string) []string {
	var out []string
next:
	for _, l := range r.Lines() {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// Pool connects to the Citus database dsn with Citus logging every command
// it sends to the workers into the returned RemoteCommands.
func Pool(t testing.TB, dsn string) (*pgxpool.Pool, *RemoteCommands) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	rc := &RemoteCommands{}
	cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
	cfg.ConnConfig.OnNotice = rc.add
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, rc
}

// NodeOf returns the port of the worker node holding the shard of value in
// the distributed table.
func NodeOf(t testing.TB, pool *pgxpool.Pool, table string, value any) int {
	t.Helper()
	var port int
	err := pool.QueryRow(context.Background(), `
		SELECT nodeport FROM pg_dist_shard_placement
		WHERE shardid = get_shard_id_for_distribution_column($1, $2::text)`, table, fmt.Sprint(value)).Scan(&port)
	if err != nil {
		t.Fatal(err)
	}
	return port
}
