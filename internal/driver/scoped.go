package driver

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// scopedDB is a db.DBTX that sends every statement in one round trip after
// its scope (and, with open.TimeoutMs, after opening a handler transaction
// that stays open). Outside a transaction the statement is still its own
// commit. send is the layout's.
type scopedDB struct {
	b    Batcher
	p    db.ScopeApplyParams
	open Open
	send func(s scopedDB, ctx context.Context, sql string, args []any) (pgx.BatchResults, error)
}

// BackendPIDQuery reads the server process running the transaction (also
// behind a pooler), for ending it if its handler hangs. A statement of its
// own: on Citus, a function in a statement routed to a worker runs there.
const BackendPIDQuery = "SELECT pg_backend_pid()"

func (s scopedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := s.send(s, ctx, sql, args)
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
	br, err := s.send(s, ctx, sql, args)
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

// readPID reads BackendPIDQuery's result when s asked for it.
func (s scopedDB) readPID(br pgx.BatchResults) error {
	if s.open.PID == nil {
		return nil
	}
	var pid int32
	if err := br.QueryRow().Scan(&pid); err != nil {
		return err
	}
	*s.open.PID = uint32(pid)
	return nil
}

// queueTimeouts queues the transaction's statement and idle timeouts of ms
// milliseconds.
func queueTimeouts(b *pgx.Batch, ms int64) {
	b.Queue("SELECT set_config('statement_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $1, true)",
		strconv.FormatInt(ms, 10))
}
