package citustest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WorkerNodeConfigs returns a connection config per Citus worker node of
// pool's database, in node group order: pool's own, with the node's host
// and port.
func WorkerNodeConfigs(t testing.TB, pool *pgxpool.Pool) []*pgx.ConnConfig {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT nodename, nodeport FROM pg_dist_node
		WHERE noderole = 'primary' AND groupid <> 0 ORDER BY groupid`)
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Name string
		Port int32
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[node])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*pgx.ConnConfig, len(nodes))
	for i, n := range nodes {
		out[i] = pool.Config().ConnConfig.Copy()
		out[i].Host, out[i].Port = n.Name, uint16(n.Port)
	}
	return out
}

// NodePool is a pool on the worker node of cc (from WorkerNodeConfigs).
func NodePool(t testing.TB, cc *pgx.ConnConfig) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig = cc
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// CoordinatorAndNode returns a pool on the Citus database dsn (the
// coordinator) and one on the same database on its first worker node.
func CoordinatorAndNode(t testing.TB, dsn string) (coord, node *pgxpool.Pool) {
	t.Helper()
	coord, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coord.Close)
	return coord, NodePool(t, WorkerNodeConfigs(t, coord)[0])
}

// Warnings is a slog.Handler that keeps the messages of warnings and
// errors.
type Warnings struct {
	mu   *sync.Mutex
	msgs *[]string
}

// NewWarnings returns an empty Warnings.
func NewWarnings() Warnings { return Warnings{mu: &sync.Mutex{}, msgs: new([]string)} }

// Enabled keeps warnings and errors.
func (h Warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// Handle keeps the record's message.
func (h Warnings) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}

// WithAttrs returns h: attributes are not kept.
func (h Warnings) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h: groups are not kept.
func (h Warnings) WithGroup(string) slog.Handler { return h }

// Matching returns the messages that contain sub.
func (h Warnings) Matching(sub string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range *h.msgs {
		if strings.Contains(m, sub) {
			out = append(out, m)
		}
	}
	return out
}

// All returns every message kept.
func (h Warnings) All() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), *h.msgs...)
}
