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
)

// replyLoser forwards a connection until a write contains marker while armed;
// from then on every read lets the server work for a moment and drops the
// connection instead of returning the reply, like a network cut after the
// statement was sent.
//
// The check runs after the underlying read as well: pgx starts a background
// reader when a write takes longer than 15 ms, and that read may already be
// waiting when the statement goes out. slowWrite holds the statement past that
// point before it is written, as a writer descheduled under load does.
type replyLoser struct {
	net.Conn
	marker    string
	armed     *atomic.Bool
	slowWrite time.Duration
	lost      atomic.Bool
}

func (c *replyLoser) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(c.marker)) && c.armed.CompareAndSwap(true, false) {
		time.Sleep(c.slowWrite)
		c.lost.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *replyLoser) Read(b []byte) (int, error) {
	if c.lost.Load() {
		return c.cut()
	}
	n, err := c.Conn.Read(b)
	if c.lost.Load() {
		return c.cut()
	}
	return n, err
}

func (c *replyLoser) cut() (int, error) {
	time.Sleep(300 * time.Millisecond)
	c.Conn.Close()
	return 0, errors.New("test: reply lost")
}

// losingPool returns a pool whose connections lose the reply to the next
// statement containing marker once armed is set. mode must send the SQL text
// with every execution (simple protocol or QueryExecModeExec), so the reply is
// lost after the statement ran, not after a Describe.
func losingPool(t *testing.T, marker string, armed *atomic.Bool, mode pgx.QueryExecMode, slowWrite time.Duration) *pgxpool.Pool {
	pool, _ := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = mode
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &replyLoser{Conn: conn, marker: marker, armed: armed, slowWrite: slowWrite}, nil
		}
	})
	return pool
}
