package redisstream_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// Identity parts of every test message.
const (
	testTenant   = "tenant-a"
	testSource   = "redis-test"
	testConsumer = "orders.projection.v1"
	testType     = "order.created"
)

// redisAddr is the shared Redis (skips or fails when it is missing).
func redisAddr(t testing.TB) string { return brokertest.Require(t, brokertest.Redis) }

func newRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// env is one test's keys on the shared Redis, with a direct client for setup
// and checks.
type env struct {
	rdb          *redis.Client
	stream, dead string
	group        string
}

func newEnv(t testing.TB, addr string) *env {
	t.Helper()
	id := randomID()
	e := &env{rdb: newRedis(t, addr), stream: "pgi:" + id + ":orders", dead: "pgi:" + id + ":dead", group: "inbox"}
	t.Cleanup(func() { _ = e.rdb.Del(context.Background(), e.stream, e.dead).Err() })
	return e
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// add appends an entry; an empty id leaves the message_id field out.
func (e *env) add(t testing.TB, id, payload string) string {
	t.Helper()
	values := map[string]any{"payload": payload}
	if id != "" {
		values["message_id"] = id
	}
	entry, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.stream, Values: values}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// config is a Consumer configuration for e with short delays.
func (e *env) config(log *slog.Logger) redisstream.Config {
	return redisstream.Config{
		Stream:           e.stream,
		Group:            e.group,
		Consumer:         "test-" + randomID(),
		Decode:           decodeOrder,
		DeadLetterStream: e.dead,
		ClaimIdle:        200 * time.Millisecond,
		Block:            100 * time.Millisecond,
		Logger:           log,
	}
}

// decodeOrder maps a test entry: identity from configuration, the message ID
// from the message_id field (left empty here), the payload field as JSON.
func decodeOrder(m redis.XMessage) (inbox.Message, error) {
	p, _ := m.Values["payload"].(string)
	if p == "" {
		return inbox.Message{}, errors.New("no payload field")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant(testTenant), Source: testSource, Consumer: testConsumer},
		EventType:     testType,
		SchemaVersion: 1,
		Payload:       json.RawMessage(p),
	}, nil
}

// decodeByEventID takes the message ID from the payload's eventId.
func decodeByEventID(m redis.XMessage) (inbox.Message, error) {
	msg, err := decodeOrder(m)
	if err != nil {
		return msg, err
	}
	var p struct {
		EventID string `json:"eventId"`
	}
	if err := json.Unmarshal(msg.Payload.(json.RawMessage), &p); err != nil {
		return msg, err
	}
	msg.MessageID = p.EventID
	return msg, nil
}

// unsettled is how many entries the group has not acknowledged: pending plus
// not yet delivered; -1 while the group does not exist.
func (e *env) unsettled(t testing.TB) int {
	t.Helper()
	ctx := context.Background()
	groups, err := e.rdb.XInfoGroups(ctx, e.stream).Result()
	if err != nil && !strings.Contains(err.Error(), "no such key") {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Name == e.group {
			return int(g.Pending + g.Lag)
		}
	}
	return -1
}

// deadLetters reads the dead-letter stream.
func (e *env) deadLetters(t testing.TB) []redis.XMessage {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), e.dead, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// run runs c until the test ends (or stop is called) and fails the test if
// Run returns an error or hangs.
func run(t testing.TB, c *redisstream.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newConsumer(t testing.TB, rdb redis.UniversalClient, client *inbox.Client, cfg redisstream.Config) *redisstream.Consumer {
	t.Helper()
	c, err := redisstream.New(rdb, client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// capture is a logger writing into a buffer the test can search.
func capture() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// quietLogger logs errors only, to the test log.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// dbProxy puts a fault proxy between a pool and the test database.
func dbProxy(t testing.TB, dsn string) (*faultproxy.Proxy, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, address := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	p, err := faultproxy.New(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	pool := newPool(t, dsn, func(c *pgxpool.Config) {
		c.ConnConfig.Host = "127.0.0.1"
		c.ConnConfig.Port = p.Port()
		c.ConnConfig.Fallbacks = nil
		c.ConnConfig.ConnectTimeout = 2 * time.Second
	})
	return p, pool
}

// tally is a drill's outcome: sent is what the test added to the stream,
// acked what the consumer acknowledged, dead what went to the dead-letter
// stream, applied the distinct messages the handler applied, lost those
// never applied, doubled those applied more than once.
type tally struct{ sent, acked, dead, applied, lost, doubled int }

// apply runs a worker over every accepted receipt; its handler counts each
// application in the business table applied(message_id, n). It fills the
// tally's applied, lost and doubled for the message IDs that must apply.
func (r *tally) apply(t testing.TB, pool *pgxpool.Pool, ids []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS applied (message_id text PRIMARY KEY, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	err := reg.Register(handler.Key{Consumer: testConsumer, EventType: testType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, `INSERT INTO applied VALUES ($1, 1) ON CONFLICT (message_id) DO UPDATE SET n = applied.n + 1`, m.MessageID)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{testConsumer}, Concurrency: 4, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT message_id, n FROM applied`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		counts[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		switch n := counts[id]; {
		case n == 0:
			r.lost++
		case n > 1:
			r.doubled++
			r.applied++
		default:
			r.applied++
		}
	}
	for id, n := range counts { // applied but never meant to be
		if !slices.Contains(ids, id) {
			t.Errorf("message %s applied %d times, but it was not to be applied", id, n)
		}
	}
}

// check prints the drill's summary line and fails unless nothing was lost
// or applied twice and everything not dead-lettered was acked and applied.
func (r tally) check(t testing.TB, drill string) {
	t.Helper()
	line := fmt.Sprintf("%s: sent=%d acked=%d dead-lettered=%d applied=%d lost=%d doubled=%d",
		drill, r.sent, r.acked, r.dead, r.applied, r.lost, r.doubled)
	fmt.Println(line)
	if r.lost != 0 || r.doubled != 0 || r.acked+r.dead != r.sent || r.applied != r.sent-r.dead {
		t.Fatalf("drill failed: %s", line)
	}
}
