package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// orderedMsg is message n of key k, for the ordering tests.
func orderedMsg(scope inbox.Scope, key string, n int) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{Scope: scope, Source: "payments", Consumer: "orders.projection.v1",
			MessageID: fmt.Sprintf("%s-%03d", key, n)},
		EventType: "order.created", SchemaVersion: 1,
		Payload:     json.RawMessage(fmt.Sprintf(`{"orderId":%q,"n":%d}`, key, n)),
		OrderingKey: key,
	}
}

type orderedPayload struct {
	OrderID string `json:"orderId"`
	N       int    `json:"n"`
}

// handledLog records, per key, the sequence numbers handled (committed: the
// record is written in the handler's transaction) and the keys running now.
const handledTable = `CREATE TABLE handled (
	seq     bigserial PRIMARY KEY,
	key     text NOT NULL,
	n       int  NOT NULL,
	attempt int  NOT NULL
)`

// keyTracker fails the test when two handlers of one key run at once.
type keyTracker struct {
	t       testing.TB
	mu      sync.Mutex
	running map[string]bool
}

func (k *keyTracker) enter(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running[key] {
		k.t.Errorf("two handlers of key %s run at once", key)
	}
	k.running[key] = true
}

func (k *keyTracker) leave(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.running, key)
}

func orderedRegistry(t testing.TB, pool *pgxpool.Pool, before func(ctx context.Context, m *handler.Msg, p orderedPayload) error) *handler.Registry {
	t.Helper()
	if _, err := pool.Exec(context.Background(), handledTable); err != nil {
		t.Fatal(err)
	}
	return registry(t, orderedHandler(t, before))
}

// orderedHandler records each message in the handled table, in its
// transaction, and fails the test when two messages of a key run at once.
func orderedHandler(t testing.TB, before func(ctx context.Context, m *handler.Msg, p orderedPayload) error) handler.Func {
	kt := &keyTracker{t: t, running: map[string]bool{}}
	return handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, p orderedPayload) error {
		// A key is one scope's: the tenancy fixtures' unkeyed messages of two
		// tenants share order IDs and may run at once.
		key := fmt.Sprintf("%s of %v", p.OrderID, m.Scope)
		kt.enter(key)
		defer kt.leave(key)
		if before != nil {
			if err := before(ctx, m, p); err != nil {
				return err
			}
		}
		// Widen the window in which an overtaking receipt would show; it
		// waits for nothing.
		time.Sleep(time.Millisecond)
		_, err := m.Tx.Exec(ctx, "INSERT INTO handled (key, n, attempt) VALUES ($1, $2, $3)", p.OrderID, p.N, m.Attempt)
		return err
	})
}

// handledOrder is each key's handled sequence numbers in commit order.
func handledOrder(t testing.TB, pool *pgxpool.Pool) map[string][]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT key, n FROM handled ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = append(out[k], n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// 20 keys x 25 messages, accepted in order per key by several callers
// (single accepts and batches mixed) while the worker runs with 8 slots and
// 4 messages per transaction: every key is handled in accept order, each
// message once.
func TestOrderingKeyOrderUnderConcurrency(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	reg := orderedRegistry(t, pool, nil)
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 8, MessagesPerTx: 4, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)

	const keys, perKey = 20, 25
	var wg sync.WaitGroup
	// Each caller owns 5 keys and accepts their messages in order; caller i
	// uses batches of 3 when i is odd.
	for caller := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := inbox.Tenant(fmt.Sprintf("t%d", caller%2))
			for n := 1; n <= perKey; {
				if caller%2 == 1 {
					var batch []inbox.Message
					for k := caller * 5; k < caller*5+5; k++ {
						for j := n; j < n+3 && j <= perKey; j++ {
							batch = append(batch, orderedMsg(scope, fmt.Sprintf("k%02d", k), j))
						}
					}
					items, err := c.AcceptBatch(ctx, batch)
					if err != nil {
						t.Error(err)
						return
					}
					for _, it := range items {
						if it.Outcome != inbox.Accepted {
							t.Errorf("batch item %v: %v", it.Outcome, it.Err)
						}
					}
					n += 3
					continue
				}
				for k := caller * 5; k < caller*5+5; k++ {
					if _, err := c.Accept(ctx, orderedMsg(scope, fmt.Sprintf("k%02d", k), n)); err != nil {
						t.Error(err)
						return
					}
				}
				n++
			}
		}()
	}
	wg.Wait()
	testkit.Eventually(t, 60*time.Second, func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == keys*perKey
	}, "every message handled")
	got := handledOrder(t, pool)
	is.Equal(len(got), keys)
	for k, ns := range got {
		is.Equal(ns, seq(1, perKey)) // key k handled in accept order, once each
		_ = k
	}
}

// With group commit, concurrent callers' keyed accepts share batches; each
// caller's key is still handled in its accept order.
func TestOrderingKeyWithGroupCommit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{GroupCommit: true, GroupCommitMaxWait: 2 * time.Millisecond})
	reg := orderedRegistry(t, pool, nil)
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 6, MessagesPerTx: 3, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	const keys, perKey = 8, 15
	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= perKey; n++ {
				m := orderedMsg(inbox.Tenant(fmt.Sprintf("t%d", k%3)), fmt.Sprintf("k%d", k), n)
				if k%2 == 0 && n%4 == 0 {
					id := fmt.Sprintf("plain-%d-%d", k, n)
					m = orderMsg(id, raw(`{"orderId":"`+id+`","n":0}`)) // unkeyed, in the same batches
				}
				if _, err := c.Accept(ctx, m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := countRows(t, pool, "true")
	testkit.Eventually(t, 60*time.Second, func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == total
	}, "every message handled")
	got := handledOrder(t, pool)
	for k := range keys {
		ns := got[fmt.Sprintf("k%d", k)]
		is.True(len(ns) > 0)
		for i := 1; i < len(ns); i++ {
			if ns[i] <= ns[i-1] {
				t.Fatalf("key k%d handled in order %v", k, ns)
			}
		}
	}
}

// Handlers fail at random (retries with a short backoff) while accepts go
// on, with batched transactions that fall back to savepoints: every key is
// still handled in accept order, each message once.
func TestOrderingKeyOrderWithRandomFailures(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	var calls atomic.Int64
	reg := orderedRegistry(t, pool, func(ctx context.Context, m *handler.Msg, p orderedPayload) error {
		if calls.Add(1)%5 == 0 { // every fifth call fails
			return errors.New("flaky downstream")
		}
		return nil
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 8, MessagesPerTx: 4, PollInterval: 20 * time.Millisecond,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	startWorker(t, w)
	const keys, perKey = 10, 20
	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= perKey; n++ {
				if _, err := c.Accept(ctx, orderedMsg(inbox.Tenant("t"), fmt.Sprintf("k%02d", k), n)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testkit.Eventually(t, 90*time.Second, func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == keys*perKey
	}, "every message handled")
	got := handledOrder(t, pool)
	is.Equal(len(got), keys)
	for k, ns := range got {
		if fmt.Sprint(ns) != fmt.Sprint(seq(1, perKey)) {
			t.Errorf("key %s handled in order %v", k, ns)
		}
	}
	is.True(calls.Load() > keys*perKey) // some failed and ran again
}

// The promotion in a handler transaction's commit round trip runs on a
// generic plan: left to choose, the server planned ReceiptPromote at every
// commit, and planning cost more than running it.
func TestOrderingPromotionRunsOnAGenericPlan(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	// The plans are counted on each connection as it is given back: a
	// connection the stopping worker was using is destroyed, and its
	// counts with it.
	var mu sync.Mutex
	plans := map[uint32][2]int64{} // backend PID -> generic, custom
	pool, _ := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
		c.AfterRelease = func(conn *pgx.Conn) bool {
			var g, cu int64
			err := conn.QueryRow(context.Background(), `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
				FROM pg_prepared_statements WHERE statement LIKE '%-- name: ' || 'ReceiptPromote %'`).Scan(&g, &cu)
			if err == nil {
				mu.Lock()
				plans[conn.PgConn().PID()] = [2]int64{g, cu}
				mu.Unlock()
			}
			return err == nil
		}
	})
	c := newClient(t, pool, inbox.Config{})
	for n := 1; n <= 8; n++ {
		_, err := c.Accept(ctx, orderedMsg(inbox.Tenant("t1"), "k1", n))
		is.NoErr(err)
	}
	w := newWorker(t, pool, orderedRegistry(t, pool, nil), inbox.WorkerConfig{Concurrency: 1, PollInterval: 20 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 30*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 8 }, "every message handled")
	is.NoErr(w.Stop(ctx))
	testkit.Eventually(t, 10*time.Second, func() bool { return pool.Stat().AcquiredConns() == 0 }, "every connection given back")

	var generic, custom int64
	mu.Lock()
	for _, p := range plans {
		generic, custom = generic+p[0], custom+p[1]
	}
	mu.Unlock()
	is.True(generic >= 7) // the commits of receipts 1 to 7 promoted the next
	is.Equal(custom, int64(0))
}
