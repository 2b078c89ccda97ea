package outbox

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/citusnode"
)

// The catalog probes: is Citus there, and is the outbox distributed. On one
// server a claim is one statement across scopes; on Citus no statement may
// lock rows on several shards, and a routed statement takes its scope as a
// parameter, so the outbox runs per scope there (relay_citus.go).
const (
	citusProbe       = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`
	distributedProbe = `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('pginbox_outbox'))`
)

// probeLayout reports whether pginbox's outbox is distributed by Citus.
func probeLayout(ctx context.Context, q db.DBTX) (bool, error) {
	var citus, distributed bool
	if err := q.QueryRow(ctx, citusProbe).Scan(&citus); err != nil {
		return false, err
	}
	if !citus {
		return false, nil
	}
	if err := q.QueryRow(ctx, distributedProbe).Scan(&distributed); err != nil {
		return false, err
	}
	return distributed, nil
}

// layout is the layout of one pool's database, read once.
type layout struct {
	mu          sync.Mutex
	known       bool
	distributed bool
	// log gets citusnode's warning for a session on a node that holds
	// shards; nil for none.
	log *slog.Logger
}

func (l *layout) get(ctx context.Context, q db.DBTX) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known {
		return l.distributed, nil
	}
	d, err := probeLayout(ctx, q)
	if err != nil {
		return false, dbError("reading the outbox's layout (Citus or one server)", err)
	}
	if d && l.log != nil {
		held, err := citusnode.HoldsShards(ctx, q, "pginbox_outbox")
		if err != nil {
			return false, dbError("reading the outbox's layout (Citus or one server)", err)
		}
		if held {
			citusnode.Warn(ctx, l.log)
		}
	}
	l.known, l.distributed = true, d
	return d, nil
}

// emitLayouts caches Emit's probe per database (host, port, name): Emit
// gets a transaction, not a pool, and must not pay a catalog read per event.
// A database is migrated to Citus with no relay or emitter running (the
// Citus line starts from version 6), so the answer does not change while a
// process runs.
var emitLayouts sync.Map // dbKey -> bool

// dbKey names a database: a comparable value, so the lookup allocates
// nothing.
type dbKey struct {
	host     string
	port     uint16
	database string
}

// emitDistributed reports whether tx's database has the outbox distributed.
// A Tx that names no connection (a custom wrapper) is probed every time.
func emitDistributed(ctx context.Context, tx Tx) (bool, error) {
	key, ok := databaseKey(tx)
	if ok {
		if d, ok := emitLayouts.Load(key); ok {
			return d.(bool), nil
		}
	}
	d, err := probeLayout(ctx, tx)
	if err != nil {
		return false, dbError("outbox emit: reading the outbox's layout (Citus or one server)", err)
	}
	if ok {
		emitLayouts.Store(key, d)
	}
	return d, nil
}

// databaseKey names the database tx writes to; false when tx does not say.
func databaseKey(tx Tx) (dbKey, bool) {
	var cfg *pgx.ConnConfig
	switch t := tx.(type) {
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
