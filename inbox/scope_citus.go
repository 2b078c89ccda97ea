package inbox

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// On Citus the row-level security policies are evaluated on the worker
// nodes, and set_config (ScopeApply) changes the coordinator's session only.
// What reaches the workers is SET LOCAL inside an explicit transaction, with
// citus.propagate_set_commands = 'local' (ScopePropagate) set before it:
// Citus sends the SET to every worker connection of the transaction, those
// opened later included. So on Citus the scope is three statements queued
// in the same round trip: ScopePropagate and one SET LOCAL per setting, and
// a statement pginbox would send alone gets a BEGIN and a COMMIT around them.

// scopeStatementsCitus is how many statements the scope is on Citus.
const scopeStatementsCitus = 3

// errScopeNUL: a setting cannot hold a NUL byte (validateScope refuses it
// first; this guards the quoting).
var errScopeNUL = errors.New("pginbox: internal: a scope setting cannot contain a NUL byte")

// quoteSetting returns v as an SQL string constant. SET takes no parameters,
// so the value is written into the statement: an escape string constant
// (E'...') with quotes and backslashes doubled, which reads the same whatever
// standard_conforming_strings says.
func quoteSetting(v string) (string, error) {
	if strings.IndexByte(v, 0) >= 0 {
		return "", errScopeNUL
	}
	return "E'" + settingEscaper.Replace(v) + "'", nil
}

var settingEscaper = strings.NewReplacer(`\`, `\\`, `'`, `''`)

// scopeSets returns the SET LOCAL statements of p: the same settings
// ScopeApply gives, both of them, so a scope replaces the one before it.
func scopeSets(p db.ScopeApplyParams) ([]string, error) {
	tenant, err := quoteSetting(p.Tenant)
	if err != nil {
		return nil, err
	}
	global, err := quoteSetting(p.Global)
	if err != nil {
		return nil, err
	}
	return []string{"SET LOCAL pginbox.tenant = " + tenant, "SET LOCAL pginbox.global = " + global}, nil
}

// queueScopeCitus queues p's scope in b the Citus way (scopeStatementsCitus
// statements).
func queueScopeCitus(ctx context.Context, b *pgx.Batch, p db.ScopeApplyParams) error {
	sets, err := scopeSets(p)
	if err != nil {
		return err
	}
	_ = db.New(batchQueue{b}).ScopePropagate(ctx)
	for _, s := range sets {
		b.Queue(s)
	}
	return nil
}

// queueCitusHead queues what precedes a statement sent with scope p on
// Citus: BEGIN when begin, the scope, and a handler transaction's timeouts
// of ms milliseconds when ms > 0 (queueTimeouts), after the scope. It returns
// how many statements it queued, and how many of the first (BEGIN and the
// scope, without parameters) sendScoped may send ahead.
func queueCitusHead(ctx context.Context, b *pgx.Batch, p db.ScopeApplyParams, begin bool, ms int64) (n, ahead int, err error) {
	if begin {
		b.Queue("BEGIN")
		n++
	}
	if err := queueScopeCitus(ctx, b, p); err != nil {
		return 0, 0, err
	}
	n += scopeStatementsCitus
	ahead = n
	if ms > 0 {
		queueTimeouts(b, ms)
		n++
	}
	return n, ahead, nil
}

// applyScopeParams sets p as tx's scope: ScopeApply on one server, the
// Citus statements in one round trip when distributed.
func applyScopeParams(ctx context.Context, tx pgx.Tx, p db.ScopeApplyParams, distributed bool) error {
	if !distributed {
		return db.New(tx).ScopeApply(ctx, p)
	}
	b := &pgx.Batch{}
	if err := queueScopeCitus(ctx, b, p); err != nil {
		return err
	}
	return sendScoped(ctx, tx, b, scopeStatementsCitus).Close()
}

// applyScope is ApplyScope for callers that know the layout.
func applyScope(ctx context.Context, tx pgx.Tx, s Scope, distributed bool) error {
	if err := validateScope(s); err != nil {
		return err
	}
	if err := applyScopeParams(ctx, tx, scopeParams(s), distributed); err != nil {
		return dbError("applying the scope", err)
	}
	return nil
}

// scopeLayouts caches, per database (host, port, name), whether pginbox's
// tables are distributed, for ApplyScope, which gets a transaction and not a
// client: the catalog is read once per database and process, or not at all
// when a Client, Worker or Admin of this process read it first. A database
// is distributed with no pginbox process running (the Citus line starts from
// version 6), so the answer does not change while a process runs.
var scopeLayouts sync.Map // layoutKey -> dbLayout

type layoutKey struct {
	host     string
	port     uint16
	database string
}

// layoutKeyOf names the database q runs on; false when q does not say.
func layoutKeyOf(q any) (layoutKey, bool) {
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
		return layoutKey{}, false
	}
	return layoutKey{cfg.Host, cfg.Port, cfg.Database}, true
}

// txDistributed reports whether tx's database has pginbox's tables
// distributed, from scopeLayouts or the catalog.
func txDistributed(ctx context.Context, tx pgx.Tx) (bool, error) {
	key, ok := layoutKeyOf(tx)
	if ok {
		if d, found := scopeLayouts.Load(key); found {
			return d.(dbLayout).distributed, nil
		}
	}
	var l layout
	return l.get(ctx, tx)
}

// scopedBatch is the results of a statement scopedDB sent in a transaction
// of its own on Citus: Close reads the COMMIT, then ends a transaction a
// failed statement left open and gives back the connection it acquired.
type scopedBatch struct {
	pgx.BatchResults
	conn     *pgxpool.Conn
	acquired bool
	ctx      context.Context
}

func (b *scopedBatch) Close() error {
	err := b.BatchResults.Close()
	if b.conn == nil {
		return err
	}
	if b.conn.Conn().PgConn().TxStatus() != 'I' && !b.conn.Conn().IsClosed() {
		// The pipeline stopped at a failed statement: the transaction is
		// still open (aborted). End it so the connection goes back clean.
		_, _ = b.conn.Exec(context.WithoutCancel(b.ctx), "ROLLBACK")
	}
	if b.acquired {
		b.conn.Release()
	}
	b.conn = nil
	return err
}

// ensure *scopedBatch is what scopedDB's readers close.
var _ pgx.BatchResults = (*scopedBatch)(nil)

// inTx reports whether b runs in a transaction already (a pgx.Tx).
func inTx(b batcher) bool {
	_, ok := b.(pgx.Tx)
	return ok
}

// sendScoped sends batch on b, whose first n statements are the Citus scope
// (BEGIN included when the batch opens its transaction). Under the simple
// protocol (PgBouncer) pgx sends a batch as one query string, and Citus
// propagates a SET LOCAL by the text of the query it came in: the workers
// would run the whole string. There those n statements go first as
// extended-protocol statements of their own (unnamed, so poolers take
// them): one more round trip, under the simple protocol only.
func sendScoped(ctx context.Context, b batcher, batch *pgx.Batch, n int) pgx.BatchResults {
	conn := connOf(b)
	if n == 0 || conn == nil || conn.Config().DefaultQueryExecMode != pgx.QueryExecModeSimpleProtocol {
		return b.SendBatch(ctx, batch)
	}
	head := &pgconn.Batch{}
	for _, q := range batch.QueuedQueries[:n] {
		head.ExecParams(q.SQL, nil, nil, nil, nil)
	}
	if _, err := conn.PgConn().ExecBatch(ctx, head).ReadAll(); err != nil {
		return failedBatch{err}
	}
	rest := &pgx.Batch{QueuedQueries: batch.QueuedQueries[n:]}
	return &sentAhead{BatchResults: b.SendBatch(ctx, rest), n: n}
}

// connOf returns the connection b sends on, or nil for a pool.
func connOf(b batcher) *pgx.Conn {
	switch t := b.(type) {
	case *pgx.Conn:
		return t
	case interface{ Conn() *pgx.Conn }: // pgx.Tx, *pgxpool.Conn
		return t.Conn()
	}
	return nil
}

// sentAhead is the results of a batch whose first n statements sendScoped
// sent ahead, and succeeded.
type sentAhead struct {
	pgx.BatchResults
	n int
}

func (r *sentAhead) Exec() (pgconn.CommandTag, error) {
	if r.n > 0 {
		r.n--
		return pgconn.CommandTag{}, nil
	}
	return r.BatchResults.Exec()
}

// failedBatch is the results of a batch that was not sent (or was sent on a
// transaction that had ended).
type failedBatch struct{ err error }

func (r failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, r.err }
func (r failedBatch) Query() (pgx.Rows, error)         { return nil, r.err }
func (r failedBatch) QueryRow() pgx.Row                { return errRow(r) }
func (r failedBatch) Close() error                     { return r.err }
func (r failedBatch) Tx() pgx.Tx                       { return nil }
