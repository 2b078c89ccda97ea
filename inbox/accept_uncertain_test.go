package inbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

func TestLostCommitReplyIsUncertainThenReconciles(t *testing.T) {
	t.Parallel()
	type variant struct {
		mode      pgx.QueryExecMode
		slowWrite time.Duration
	}
	for name, v := range map[string]variant{
		"simple protocol":               {mode: pgx.QueryExecModeSimpleProtocol},
		"extended protocol":             {mode: pgx.QueryExecModeExec},
		"simple protocol, slow write":   {mode: pgx.QueryExecModeSimpleProtocol, slowWrite: 40 * time.Millisecond},
		"extended protocol, slow write": {mode: pgx.QueryExecModeExec, slowWrite: 40 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			var armed atomic.Bool
			pool := losingPool(t, "INSERT INTO pginbox_receipts", &armed, v.mode, v.slowWrite)
			c := newClient(t, pool, inbox.Config{})
			msg := orderMsg("evt-lost", map[string]string{"orderId": "o-1"})

			armed.Store(true)
			_, err := c.Accept(ctx, msg)
			is.True(errors.Is(err, inbox.ErrCommitUncertain))
			is.Equal(inbox.ActionFor(err), inbox.ActionRetry)
			is.True(!armed.Load()) // the cut really happened

			// The server committed although the client never heard back.
			testkit.Eventually(t, 5*time.Second, func() bool { return countRows(t, pool, "message_id = 'evt-lost'") > 0 },
				"the accept to commit on the server")
			// The transport redelivers; the next Accept reconciles.
			res, err := c.Accept(ctx, msg)
			is.NoErr(err)
			is.Equal(res.Outcome, inbox.Duplicate)
			is.Equal(countRows(t, pool, "true"), 1)
		})
	}
}

func TestAcceptFailingBeforeSendIsARetryableStorageError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Accept(ctx, orderMsg("evt-1", map[string]string{"orderId": "o-1"}))
	is.True(err != nil)
	is.True(!errors.Is(err, inbox.ErrCommitUncertain)) // never sent: certainly not committed
	is.Equal(inbox.ActionFor(err), inbox.ActionRetry)
}
