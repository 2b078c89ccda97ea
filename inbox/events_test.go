package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// A subscriber sees each receipt's story: claimed, then completed, failed
// (with its retry time) or dead, with the handler's duration and metadata.
func TestWorkerEvents(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ok := orderMsg("ok", map[string]string{"orderId": "o-1"})
	ok.Metadata = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	acceptAll(t, c, ok, orderMsg("retry", map[string]string{"orderId": "o-2"}), orderMsg("dead", map[string]string{"orderId": "o-3"}))

	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		switch m.MessageID {
		case "retry":
			return errors.New("downstream busy")
		case "dead":
			return handler.Permanent(errors.New("bad order"))
		}
		return nil
	}), inbox.WorkerConfig{})
	sub := w.Subscribe(inbox.SubscribeConfig{})
	defer sub.Close()
	_, err := w.Drain(ctx)
	is.NoErr(err)

	byKind := map[inbox.EventKind][]inbox.Event{}
	for len(byKind[inbox.EventClaimed]) < 3 || len(byKind[inbox.EventCompleted])+len(byKind[inbox.EventFailed])+len(byKind[inbox.EventDead]) < 3 {
		select {
		case e := <-sub.C():
			byKind[e.Kind] = append(byKind[e.Kind], e)
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far: %v", byKind)
		}
	}
	is.Equal(len(byKind[inbox.EventCompleted]), 1)
	done := byKind[inbox.EventCompleted][0]
	is.Equal(done.Consumer, "orders.projection.v1")
	is.Equal(done.EventType, "order.created")
	is.Equal(done.Attempt, 1)
	is.True(done.Duration > 0)
	is.Equal(done.Metadata["traceparent"], ok.Metadata["traceparent"])
	is.Equal(len(byKind[inbox.EventFailed]), 1)
	failed := byKind[inbox.EventFailed][0]
	is.True(failed.RetryAt.After(time.Now().Add(-time.Second)))
	is.Equal(failed.Err.Error(), "downstream busy")
	is.Equal(len(byKind[inbox.EventDead]), 1)
	is.True(handler.IsPermanent(byKind[inbox.EventDead][0].Err))
	is.Equal(sub.Dropped(), uint64(0))
}

// A subscriber that never reads cannot slow the worker down: events beyond its
// buffer are dropped and counted.
func TestBlockedSubscriberDoesNotStopTheWorker(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	const n = 40
	for i := range n {
		acceptAll(t, c, orderMsg(fmt.Sprint("evt-", i), map[string]int{"n": i}))
	}
	w := newWorker(t, pool, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{})
	blocked := w.Subscribe(inbox.SubscribeConfig{Buffer: 1})
	defer blocked.Close()
	only := w.Subscribe(inbox.SubscribeConfig{Kinds: []inbox.EventKind{inbox.EventCompleted}, Buffer: n})
	defer only.Close()
	done, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(done, n)
	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), n)
	is.Equal(blocked.Dropped(), uint64(2*n-1)) // n claimed + n completed, one fits
	is.Equal(len(only.C()), n)                 // filtered to its kind, nothing dropped
	is.Equal(only.Dropped(), uint64(0))
}

// Middleware sees every accept path and every handler call.
func TestMiddlewareWrapsAcceptsAndHandlers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	var mu sync.Mutex
	var seen []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	c := newClient(t, pool, inbox.Config{
		AcceptMiddleware: []inbox.AcceptMiddleware{func(next inbox.AcceptFunc) inbox.AcceptFunc {
			return func(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
				res, err := next(ctx, msg)
				record(fmt.Sprintf("accept %s %s %v", msg.MessageID, res.Outcome, inbox.ActionFor(err)))
				return res, err
			}
		}},
		AcceptBatchMiddleware: []inbox.AcceptBatchMiddleware{func(next inbox.AcceptBatchFunc) inbox.AcceptBatchFunc {
			return func(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error) {
				items, err := next(ctx, msgs)
				record(fmt.Sprintf("batch %d %v", len(items), err))
				return items, err
			}
		}},
	})
	_, err := c.Accept(ctx, orderMsg("a", map[string]int{"n": 1}))
	is.NoErr(err)
	_, err = c.Accept(ctx, orderMsg("a", map[string]int{"n": 1}))
	is.NoErr(err)
	is.NoErr(pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := c.AcceptTx(ctx, tx, orderMsg("b", map[string]int{"n": 2}))
		return err
	}))
	_, err = c.AcceptBatch(ctx, []inbox.Message{orderMsg("c", map[string]int{"n": 3}), orderMsg("d", "")})
	is.NoErr(err)

	var calls atomic.Int32
	w := newWorker(t, pool, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{
		HandlerMiddleware: []handler.Middleware{func(next handler.Func) handler.Func {
			return func(ctx context.Context, m *handler.Msg) error {
				calls.Add(1)
				if got, ok := handler.MsgFromContext(ctx); !ok || got != m {
					return errors.New("the handler's context does not carry its message")
				}
				return next(ctx, m)
			}
		}},
	})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(int(calls.Load()), n)
	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), n)
	is.Equal(seen, []string{"accept a accepted ack", "accept a duplicate ack", "accept b accepted ack", "batch 2 <nil>"})
}
