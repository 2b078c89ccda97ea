package driver

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// On Citus the row-level security policies are evaluated on the worker
// nodes, and set_config (ScopeApply) changes the coordinator's session only.
// What reaches the workers is SET LOCAL inside an explicit transaction, with
// citus.propagate_set_commands = 'local' (ScopePropagate) set before it:
// Citus sends the SET to every worker connection of the transaction, those
// opened later included. So on Citus the scope is three statements queued
// in the same round trip: ScopePropagate and one SET LOCAL per setting, and
// a statement pginbox would send alone gets a BEGIN and a COMMIT around them.

// citusScopeStatements is how many statements the scope is on Citus.
const citusScopeStatements = 3

// errScopeNUL: a setting cannot hold a NUL byte (the scope's validation
// refuses it first; this guards the quoting).
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

// queueCitusScope queues p's scope in b the Citus way
// (citusScopeStatements statements): both settings, so a scope replaces
// the one before it.
func queueCitusScope(ctx context.Context, b *pgx.Batch, p db.ScopeApplyParams) error {
	tenant, err := quoteSetting(p.Tenant)
	if err != nil {
		return err
	}
	global, err := quoteSetting(p.Global)
	if err != nil {
		return err
	}
	_ = Queue(b).ScopePropagate(ctx)
	b.Queue("SET LOCAL pginbox.tenant = " + tenant)
	b.Queue("SET LOCAL pginbox.global = " + global)
	return nil
}

// queueCitusHead queues what precedes a statement sent with scope p on
// Citus: BEGIN when begin, the scope, and a handler transaction's timeouts
// of ms milliseconds when ms > 0, after the scope. It returns how many
// statements it queued, and how many of the first (BEGIN and the scope,
// without parameters) sendScoped may send ahead.
func queueCitusHead(ctx context.Context, b *pgx.Batch, p db.ScopeApplyParams, begin bool, ms int64) (n, ahead int, err error) {
	if begin {
		b.Queue("BEGIN")
		n++
	}
	if err := queueCitusScope(ctx, b, p); err != nil {
		return 0, 0, err
	}
	n += citusScopeStatements
	ahead = n
	if ms > 0 {
		queueTimeouts(b, ms)
		n++
	}
	return n, ahead, nil
}

// sendCitus sends the scope as SET LOCAL statements, in the caller's
// transaction, in the handler transaction it opens (s.open), or in one of
// its own (BEGIN ... COMMIT in the same pipeline, on a connection held
// until the results are closed).
func sendCitus(s scopedDB, ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	opening := s.open.TimeoutMs > 0
	own := !inTx(s.b) && !opening
	b := &pgx.Batch{}
	n, ahead, err := queueCitusHead(ctx, b, s.p, own || opening, s.open.TimeoutMs)
	if err != nil {
		return nil, err
	}
	if s.open.PID != nil {
		b.Queue(BackendPIDQuery)
	}
	b.Queue(sql, args...)
	if own {
		b.Queue("COMMIT")
	}
	var br pgx.BatchResults
	if own {
		sb := &ownTx{ctx: ctx}
		switch c := s.b.(type) {
		case *pgxpool.Conn:
			sb.conn = c
		case *pgxpool.Pool:
			conn, err := c.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			sb.conn, sb.acquired = conn, true
		}
		if sb.conn != nil {
			sb.BatchResults = sendScoped(ctx, sb.conn, b, ahead)
		} else {
			sb.BatchResults = sendScoped(ctx, s.b, b, ahead)
		}
		br = sb
	} else {
		br = sendScoped(ctx, s.b, b, ahead)
	}
	if err := readExecs(br, n); err != nil {
		br.Close()
		return nil, err
	}
	if err := s.readPID(br); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

// ownTx is the results of a statement sent in a transaction of its own on
// Citus: Close reads the COMMIT, then ends a transaction a failed statement
// left open and gives back the connection it acquired.
type ownTx struct {
	pgx.BatchResults
	conn     *pgxpool.Conn
	acquired bool
	ctx      context.Context
}

func (b *ownTx) Close() error {
	err := b.BatchResults.Close()
	if b.conn == nil {
		return err
	}
	rollbackAborted(b.ctx, b.conn)
	if b.acquired {
		b.conn.Release()
	}
	b.conn = nil
	return err
}

// rollbackAborted ends the transaction a failed statement of a pipeline
// left open (aborted), so the connection goes back to the pool clean.
func rollbackAborted(ctx context.Context, c *pgxpool.Conn) {
	if c.Conn().PgConn().TxStatus() != 'I' && !c.Conn().IsClosed() {
		_, _ = c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
}

// sendScoped sends batch on b, whose first n statements are the Citus scope
// (BEGIN included when the batch opens its transaction). Under the simple
// protocol (PgBouncer) pgx sends a batch as one query string, and Citus
// propagates a SET LOCAL by the text of the query it came in: the workers
// would run the whole string. There those n statements go first as
// extended-protocol statements of their own (unnamed, so poolers take
// them): one more round trip, under the simple protocol only.
func sendScoped(ctx context.Context, b Batcher, batch *pgx.Batch, n int) pgx.BatchResults {
	conn := connOf(b)
	if n == 0 || conn == nil || conn.Config().DefaultQueryExecMode != pgx.QueryExecModeSimpleProtocol {
		return b.SendBatch(ctx, batch)
	}
	head := &pgconn.Batch{}
	for _, q := range batch.QueuedQueries[:n] {
		head.ExecParams(q.SQL, nil, nil, nil, nil)
	}
	if _, err := conn.PgConn().ExecBatch(ctx, head).ReadAll(); err != nil {
		return FailedBatch{err}
	}
	rest := &pgx.Batch{QueuedQueries: batch.QueuedQueries[n:]}
	return &sentAhead{BatchResults: b.SendBatch(ctx, rest), n: n}
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

func (citus) Scoped(b Batcher, s inboxtype.Scope) db.DBTX {
	return scopedDB{b: b, p: ScopeParams(s), send: sendCitus}
}

func (citus) Opening(b Batcher, s inboxtype.Scope, o Open) db.DBTX {
	o.DiscardPlans = false // the plans routed statements use are made per call
	return scopedDB{b: b, p: ScopeParams(s), open: o, send: sendCitus}
}

// OpenTx sends the scope as SET LOCAL statements (queueCitusHead), which
// reach the worker nodes.
func (citus) OpenTx(ctx context.Context, b Batcher, s inboxtype.Scope, timeoutMs int64) (uint32, error) {
	batch := &pgx.Batch{}
	n, ahead, err := queueCitusHead(ctx, batch, ScopeParams(s), true, timeoutMs)
	if err != nil {
		return 0, err
	}
	batch.Queue(BackendPIDQuery)
	return sendOpening(ctx, b, batch, n, ahead)
}

func (citus) SetScope(ctx context.Context, tx pgx.Tx, p db.ScopeApplyParams) error {
	b := &pgx.Batch{}
	if err := queueCitusScope(ctx, b, p); err != nil {
		return err
	}
	return sendScoped(ctx, tx, b, citusScopeStatements).Close()
}

// EnsureScope reads the scope on the coordinator, where ScopeEnsure's
// set_config sets it too; a scope it applied is then sent the Citus way:
// one more round trip, on Citus only.
func (c citus) EnsureScope(ctx context.Context, tx pgx.Tx, s inboxtype.Scope) (inboxtype.Scope, bool, error) {
	return ensureScope(ctx, tx, s, c.SetScope)
}

// sendOpening sends an opening batch whose first n statements are Execs
// (ahead of them may go first: sendScoped), then reads the process ID.
func sendOpening(ctx context.Context, b Batcher, batch *pgx.Batch, n, ahead int) (uint32, error) {
	br := sendScoped(ctx, b, batch, ahead)
	var pid int32
	err := readExecs(br, n)
	if err == nil {
		err = br.QueryRow().Scan(&pid)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return uint32(pid), err
}
