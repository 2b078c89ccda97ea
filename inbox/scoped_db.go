package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// batcher sends a pipelined batch: a pool, a pooled connection or a transaction.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// scopedDB is a db.DBTX that sends every statement in one round trip after
// ScopeApply. Outside a transaction the pair is one implicit transaction (one
// Sync ends the pipeline), so the setting lasts for that statement only and
// the statement is still its own commit.
//
// On Citus (citus) the scope is the statements of queueScopeCitus instead,
// which reach the worker nodes only inside an explicit transaction: outside
// a caller's transaction the statement gets a BEGIN and a COMMIT around it,
// still one round trip and one commit.
type scopedDB struct {
	b   batcher
	p   db.ScopeApplyParams
	pid *uint32 // when set, receives the server process ID (backendPIDQuery)
	// openMs, when set, opens a transaction first (openQueries) with these
	// statement and idle timeouts: it stays open after the round trip.
	openMs int64
	citus  bool
	// discardPlans, with openMs, has the session make its plans again
	// first (planRenewal).
	discardPlans bool
}

// backendPIDQuery reads the server process running the transaction (also
// behind a pooler), for ending it if its handler hangs. A statement of its
// own: on Citus, a function in a statement routed to a worker runs there.
const backendPIDQuery = "SELECT pg_backend_pid()"

// scopedOpen is scoped for a handler transaction's first statement: in the
// same round trip it opens the transaction on conn with timeouts of ms
// milliseconds and reads the server process ID into pid.
func scopedOpen(conn batcher, s Scope, ms int64, pid *uint32, distributed bool) scopedDB {
	return scopedDB{b: conn, p: scopeParams(s), pid: pid, openMs: ms, citus: distributed}
}

// scoped runs statements on b with s applied; distributed says the tables
// are on Citus.
func scoped(b batcher, s Scope, distributed bool) scopedDB {
	return scopedDB{b: b, p: scopeParams(s), citus: distributed}
}

func (s scopedDB) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if s.citus {
		return s.sendCitus(ctx, sql, args)
	}
	b := &pgx.Batch{}
	if s.openMs > 0 {
		openQueries(b, s.openMs)
		if s.discardPlans {
			b.Queue("DISCARD PLANS")
		}
		b.Queue(genericPlansOn)
	}
	queueScope(ctx, b, s.p)
	if s.pid != nil {
		b.Queue(backendPIDQuery)
	}
	b.Queue(sql, args...)
	if s.openMs > 0 {
		b.Queue(genericPlansOff) // read by the caller's Close
	}
	br := s.b.SendBatch(ctx, b)
	if s.openMs > 0 {
		err := openedResults(br)
		if err == nil && s.discardPlans {
			_, err = br.Exec()
		}
		if err == nil {
			_, err = br.Exec()
		}
		if err != nil {
			br.Close()
			return nil, err
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	if err := s.readPID(br); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

// genericPlansOn and genericPlansOff bracket the worker's statement that
// opens a handler transaction (ReceiptStart) so it runs on a generic plan,
// then restore the caller's settings (pipetx.ForceGenericPlan's) for the
// handler's own statements. Left to choose, the server plans it afresh at
// every call (a custom plan for an array of known length looks cheaper), and
// planning it costs more than running it. Both are local to the transaction.
// Not on Citus, which routes a statement by planning it for its parameters.
var (
	genericPlansOn  = "SELECT " + pipetx.SaveGenericPlanSettings + ", " + pipetx.ForceGenericPlan
	genericPlansOff = "SELECT " + pipetx.RestoreGenericPlanSettings
)

// readPID reads backendPIDQuery's result when s asked for it.
func (s scopedDB) readPID(br pgx.BatchResults) error {
	if s.pid == nil {
		return nil
	}
	var pid int32
	if err := br.QueryRow().Scan(&pid); err != nil {
		return err
	}
	*s.pid = uint32(pid)
	return nil
}

// sendCitus is send on Citus: the scope as SET LOCAL statements, in the
// caller's transaction, in the handler transaction it opens (openMs), or in
// one of its own (BEGIN ... COMMIT in the same pipeline, on a connection held
// until the results are closed).
func (s scopedDB) sendCitus(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	own := !inTx(s.b) && s.openMs == 0
	b := &pgx.Batch{}
	n, ahead, err := queueCitusHead(ctx, b, s.p, own || s.openMs > 0, s.openMs)
	if err != nil {
		return nil, err
	}
	if s.pid != nil {
		b.Queue(backendPIDQuery)
	}
	b.Queue(sql, args...)
	if own {
		b.Queue("COMMIT")
	}
	var br pgx.BatchResults
	if own {
		sb := &scopedBatch{ctx: ctx}
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
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	if err := s.readPID(br); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

func (s scopedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := s.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (s scopedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := s.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return pipetx.EndRows(rows, br.Close), nil
}

func (s scopedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipetx.FirstRow(s.Query(ctx, sql, args...))
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
