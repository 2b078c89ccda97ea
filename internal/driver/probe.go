package driver

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/citusnode"
)

// The catalog probe: is Citus there, are pginbox's tables distributed, and
// does the session's node hold shards of them.
const (
	citusProbe       = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`
	distributedProbe = `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('pginbox_work'))`
)

// probe reads the layout of q's database from its catalog.
func probe(ctx context.Context, q db.DBTX) (Driver, bool, error) {
	var citusOn, distributed bool
	if err := q.QueryRow(ctx, citusProbe).Scan(&citusOn); err != nil || !citusOn {
		return postgres{}, false, err
	}
	if err := q.QueryRow(ctx, distributedProbe).Scan(&distributed); err != nil || !distributed {
		return postgres{}, false, err
	}
	local, err := citusnode.HoldsShards(ctx, q, "pginbox_work")
	if err != nil {
		return nil, false, err
	}
	return citus{}, local, nil
}

// probed caches the probe per database (host, port, name): a database is
// distributed with no pginbox process running (the Citus line starts from
// version 6), so the answer does not change while a process runs.
var probed sync.Map // dbKey -> result

type result struct {
	d     Driver
	local bool // the session's node holds shards
}

type dbKey struct {
	host     string
	port     uint16
	database string
}

// keyOf names the database q runs on; false when q does not say (a custom
// wrapper), which is then probed every time.
func keyOf(q any) (dbKey, bool) {
	var cfg *pgx.ConnConfig
	switch t := q.(type) {
	case interface{ Conn() *pgx.Conn }: // pgx.Tx, *pgxpool.Conn
		if c := t.Conn(); c != nil {
			cfg = c.Config()
		}
	case *pgx.Conn:
		cfg = t.Config()
	case *pgxpool.Pool:
		cfg = t.Config().ConnConfig
	}
	if cfg == nil {
		return dbKey{}, false
	}
	return dbKey{cfg.Host, cfg.Port, cfg.Database}, true
}

// For returns the driver of q's database, probing its catalog the first
// time this process asks about that database.
func For(ctx context.Context, q db.DBTX) (Driver, error) {
	r, err := lookup(ctx, q)
	return r.d, err
}

func lookup(ctx context.Context, q db.DBTX) (result, error) {
	key, named := keyOf(q)
	if named {
		if v, ok := probed.Load(key); ok {
			return v.(result), nil
		}
	}
	d, local, err := probe(ctx, q)
	if err != nil {
		return result{}, err
	}
	r := result{d: d, local: local}
	if named {
		probed.Store(key, r)
	}
	return r, nil
}

// Lazy is a component's driver, probed at its first use: constructors take
// no context and do not touch the database.
type Lazy struct {
	d  atomic.Pointer[Driver]
	mu sync.Mutex
	// Log gets the warning for a session on a Citus node that holds shards;
	// nil for none.
	Log *slog.Logger
}

// Get returns the driver, probing on q the first time.
func (l *Lazy) Get(ctx context.Context, q db.DBTX) (Driver, error) {
	if d := l.d.Load(); d != nil {
		return *d, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.d.Load(); d != nil {
		return *d, nil
	}
	r, err := lookup(ctx, q)
	if err != nil {
		return nil, err
	}
	if r.local && l.Log != nil {
		citusnode.Warn(ctx, l.Log)
	}
	l.d.Store(&r.d)
	return r.d, nil
}

// Known returns the driver once Get found it, nil before.
func (l *Lazy) Known() Driver {
	if d := l.d.Load(); d != nil {
		return *d
	}
	return nil
}
