// Package pipetx runs a statement in a transaction of its own with BEGIN,
// the statement and COMMIT in one pipeline: one round trip instead of three.
package pipetx

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Async is a db.DBTX (the interface sqlc's code takes) that runs each
// statement in a transaction of its own whose commit does not wait for its
// WAL flush (synchronous_commit off, local to it). It is for bookkeeping whose
// loss in a server crash only returns rows to their earlier state, such as
// claims: the durable commit that follows a claim flushes it anyway.
//
// With GenericPlan, the statement runs on a generic plan (plan_cache_mode,
// local to its transaction): for a statement whose planning costs more than
// its run and that the server would otherwise plan at every call. Its plan
// must not depend on its parameters' values. Not on Citus, which routes a
// statement by planning it for its parameters.
//
// With OneConnPerNode, a statement Citus runs on many shards (a discovery
// read) runs them one after another over one connection per worker node,
// opening no transaction there. Citus otherwise opens more connections to a
// node for a statement with many shards there and closes all but one after
// it: a new server process on the node each time, which costs more than the
// shard reads. Harmless where Citus is not loaded.
type Async struct {
	Conn           *pgx.Conn // runs the pipelines; not in a transaction
	GenericPlan    bool      // plan the statement generically (ForceGenericPlan), in its transaction
	OneConnPerNode bool      // one connection per Citus worker node, in the statement's transaction
}

// genericPlanSettings are what ForceGenericPlan sets. A session keeps a
// generic plan until its tables are analyzed again, whatever their size
// meanwhile: made on an empty queue (a new database, or after a vacuum), it
// would scan the whole queue at every call once a backlog built up, so it is
// made with sequential scans and hash and merge joins off. pginbox's
// statements find their rows by key, so an index path always exists.
var genericPlanSettings = [][2]string{
	{"plan_cache_mode", "force_generic_plan"},
	{"enable_seqscan", "off"},
	{"enable_hashjoin", "off"},
	{"enable_mergejoin", "off"},
}

// ForceGenericPlan is the select-list items that make the rest of a
// transaction run its prepared statements on generic plans (made as
// genericPlanSettings says). SaveGenericPlanSettings keeps the session's
// values of those settings (in pginbox.*, local to the transaction) and
// RestoreGenericPlanSettings sets them back, for a transaction whose later
// statements are the caller's.
var (
	ForceGenericPlan           = settingList("set_config('%[1]s', '%[2]s', true)")
	SaveGenericPlanSettings    = settingList("set_config('pginbox.%[1]s', current_setting('%[1]s'), true)")
	RestoreGenericPlanSettings = settingList("set_config('%[1]s', current_setting('pginbox.%[1]s'), true)")
)

// settingList formats each of genericPlanSettings (name, value) with format
// and joins them into one select list.
func settingList(format string) string {
	items := make([]string, len(genericPlanSettings))
	for i, s := range genericPlanSettings {
		items[i] = fmt.Sprintf(format, s[0], s[1])
	}
	return strings.Join(items, ", ")
}

const (
	asyncSetting   = "SELECT set_config('synchronous_commit', 'off', true)"
	oneConnPerNode = "set_config('citus.max_adaptive_executor_pool_size', '1', true), " +
		"set_config('citus.select_opens_transaction_block', 'off', true)"
)

func (a Async) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	settings := asyncSetting
	if a.GenericPlan {
		settings += ", " + ForceGenericPlan
	}
	if a.OneConnPerNode {
		settings += ", " + oneConnPerNode
	}
	b.Queue(settings)
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := a.Conn.SendBatch(ctx, b)
	for range 2 {
		if _, err := br.Exec(); err != nil {
			a.end(br)
			return nil, err
		}
	}
	return br, nil
}

// end reads what is left of the pipeline (COMMIT's result among it) and
// rolls back a transaction a failed statement left open: after an error the
// server skips the rest of the pipeline, COMMIT included.
func (a Async) end(br pgx.BatchResults) error {
	err := br.Close()
	if a.Conn.PgConn().TxStatus() != 'I' && !a.Conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, rerr := a.Conn.Exec(ctx, "ROLLBACK"); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Exec runs sql in a transaction of its own, in one round trip.
func (a Async) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := a.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if eerr := a.end(br); err == nil {
		err = eerr
	}
	return tag, err
}

// Query runs sql in a transaction of its own, which commits once the rows
// are read (or closed).
func (a Async) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := a.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		a.end(br)
		return nil, err
	}
	return EndRows(rows, func() error { return a.end(br) }), nil
}

// QueryRow is Query for one row.
func (a Async) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return FirstRow(a.Query(ctx, sql, args...))
}
