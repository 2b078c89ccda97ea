package redisstream_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// Identity parts of every test message; the event type is the drill
// ledger's, so a drill.Ledger can apply them.
const (
	testTenant   = "tenant-a"
	testSource   = "redis-test"
	testConsumer = "orders.projection.v1"
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

// config is a Consumer configuration for e, reading through rdb, with
// short delays.
func (e *env) config(rdb redis.UniversalClient, log *slog.Logger) redisstream.Config {
	return redisstream.Config{
		Redis:            rdb,
		Scope:            inbox.Tenant(testTenant),
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

// decodeOrder maps a test entry: the scope comes from Config.Scope, the
// message ID from the message_id field (both left empty here), the payload
// is the payload field.
func decodeOrder(m redis.XMessage) (inbox.Message, error) {
	p, _ := m.Values["payload"].(string)
	if p == "" {
		return inbox.Message{}, errors.New("no payload field")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: testSource, Consumer: testConsumer},
		EventType:     drill.EventType,
		SchemaVersion: drill.SchemaVersion,
		Payload:       json.RawMessage(p),
	}, nil
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

// start creates a Consumer for cfg and runs it until the test ends (or
// stop is called); Run must return nil.
func start(t testing.TB, acc redisstream.Accepter, cfg redisstream.Config) (stop func()) {
	t.Helper()
	c, err := redisstream.NewConsumer(acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drill.Run(t, c.Run)
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
