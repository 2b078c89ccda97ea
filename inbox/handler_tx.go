package inbox

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/handler"
)

// handlerTx is the transaction a handler gets as handler.Msg.Tx: the worker's
// transaction with Commit and Rollback refused. Everything else, nested
// savepoints included, passes through.
type handlerTx struct {
	pgx.Tx
	ended atomic.Bool // the handler tried to end the transaction
}

func (t *handlerTx) Commit(context.Context) error {
	t.ended.Store(true)
	return handler.ErrTxOwnedByWorker
}

func (t *handlerTx) Rollback(context.Context) error {
	t.ended.Store(true)
	return handler.ErrTxOwnedByWorker
}
