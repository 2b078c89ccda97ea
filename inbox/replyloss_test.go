package inbox_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// replyLoser forwards a connection until a write contains marker while armed;
// from then on a read waits for the server's answer to that statement and
// drops the connection instead of returning it, like a network cut after the
// statement was sent and ran.
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
	cutOnce   sync.Once
}

func (c *replyLoser) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(c.marker)) && c.armed.CompareAndSwap(true, false) {
		time.Sleep(c.slowWrite) // the delay is the fault: pgx acts on a write's duration
		c.lost.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *replyLoser) Read(b []byte) (int, error) {
	if c.lost.Load() {
		return c.cut(nil)
	}
	n, err := c.Conn.Read(b)
	if c.lost.Load() {
		return c.cut(b[:n])
	}
	return n, err
}

// cut reads the server's answer to the statement, starting with seen (read
// already), up to its ReadyForQuery, and closes the connection without
// returning it. The answer shows the statement ran; closing earlier could
// reset the connection before the server read it.
func (c *replyLoser) cut(seen []byte) (int, error) {
	c.cutOnce.Do(func() {
		answer := append([]byte(nil), seen...)
		buf := make([]byte, 4096)
		c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for !readyForQuery(answer) {
			n, err := c.Conn.Read(buf)
			answer = append(answer, buf[:n]...)
			if err != nil {
				break
			}
		}
		c.Conn.Close()
	})
	return 0, errors.New("test: reply lost")
}

// readyForQuery reports whether b, backend messages from a message boundary
// on, holds a ReadyForQuery: the end of the server's answer to a query.
func readyForQuery(b []byte) bool {
	for len(b) >= 5 {
		if b[0] == 'Z' {
			return true
		}
		n := 1 + int(binary.BigEndian.Uint32(b[1:5]))
		if len(b) < n {
			return false
		}
		b = b[n:]
	}
	return false
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
