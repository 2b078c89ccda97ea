package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
)

// cutAfterSend loses the reply to the accept statement: once the statement is
// sent, the next read waits until the server has had time to execute and commit
// it, then closes the connection instead of returning the reply.
type cutAfterSend struct {
	net.Conn
	armed *atomic.Bool
	sent  *atomic.Bool
}

func (c cutAfterSend) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil && bytes.Contains(b, []byte("INSERT INTO pginbox_receipts")) && c.armed.CompareAndSwap(true, false) {
		c.sent.Store(true)
	}
	return n, err
}

func (c cutAfterSend) Read(b []byte) (int, error) {
	if c.sent.Load() {
		time.Sleep(300 * time.Millisecond)
		c.Conn.Close()
		return 0, errors.New("test: connection cut before the reply arrived")
	}
	return c.Conn.Read(b)
}

func TestLostCommitReplyIsUncertainThenReconciles(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]pgx.QueryExecMode{
		"simple protocol":   pgx.QueryExecModeSimpleProtocol,
		"extended protocol": pgx.QueryExecModeExec,
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			var armed atomic.Bool
			pool, _ := newPool(t, func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = mode
				dial := c.ConnConfig.DialFunc
				c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
					conn, err := dial(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return cutAfterSend{Conn: conn, armed: &armed, sent: new(atomic.Bool)}, nil
				}
			})
			c := newClient(t, pool, inbox.Config{})
			msg := orderMsg("evt-lost", map[string]string{"orderId": "o-1"})

			armed.Store(true)
			_, err := c.Accept(ctx, msg)
			is.True(errors.Is(err, inbox.ErrCommitUncertain))
			is.Equal(inbox.ActionFor(err), inbox.ActionRetry)
			is.True(!armed.Load()) // the cut really happened

			// The server committed although the client never heard back.
			deadline := time.Now().Add(5 * time.Second)
			for countRows(t, pool, "message_id = 'evt-lost'") == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the accept never committed on the server")
				}
				time.Sleep(20 * time.Millisecond)
			}
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
