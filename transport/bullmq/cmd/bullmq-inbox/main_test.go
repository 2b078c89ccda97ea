package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	db := map[string]string{"DATABASE_URL": "x"}
	base := []string{"-queue", "q", "-tenant", "t", "-source", "s", "-consumer", "c"}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{base, nil, "-database-url (or DATABASE_URL) is required"},
		{[]string{"-database-url", "x"}, nil, "-queue is required"},
		{[]string{"-queue", "q", "-source", "s", "-consumer", "c"}, db, "-tenant or -global is required"},
		{append(base, "extra"), db, `unexpected argument "extra"`},
		{[]string{"-lock-duration", "soon"}, nil, "invalid value"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), tc.args, env(tc.env), &stderr); code != brokercmd.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), brokercmd.ExitUsage, tc.want)
		}
	}
	var stderr bytes.Buffer
	if code := program.Run(context.Background(), []string{"-help"}, env(nil), &stderr); code != brokercmd.ExitOK || !strings.Contains(stderr.String(), "-id-field") {
		t.Errorf("-help: exit %d, stderr %q", code, stderr.String())
	}
}

// The program accepts a job (event type from its name, message ID from its
// ID, payload its data, scope from -tenant), fails one without a name, and
// exits 0 on cancel. The jobs are added by the package's Publisher, which
// writes BullMQ's data model (the package's tests check that against BullMQ
// in Node).
func TestRunAccepts(t *testing.T) {
	t.Parallel()
	addr := brokertest.Require(t, brokertest.Redis)
	dsn := inboxtest.Database(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	queue := "pgi-cmd-" + time.Now().Format("150405.000000000")
	defer func() {
		keys, _ := rdb.Keys(ctx, bullmq.DefaultPrefix+":"+queue+":*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}()
	pub, err := bullmq.NewPublisher(bullmq.PublisherConfig{Redis: rdb, AllowNotDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	good := outbox.Message{ID: inboxtype.New(), Source: "shop", Destination: queue, EventType: "order.created", SchemaVersion: 1, Payload: json.RawMessage(`{"orderId":"o-1"}`)}
	nameless := outbox.Message{ID: inboxtype.New(), Source: "shop", Destination: queue, SchemaVersion: 1, Payload: json.RawMessage(`{"orderId":"o-2"}`)}
	if errs := pub.Publish(ctx, []outbox.Message{good, nameless}); errs != nil {
		t.Fatal(errs)
	}

	runCtx, cancel := context.WithCancel(ctx)
	var stderr testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- program.Run(runCtx, []string{"-redis-url", "redis://" + addr + "/0", "-queue", queue,
			"-tenant", "acme", "-source", "shop", "-consumer", "orders.projection.v1"},
			env(map[string]string{"DATABASE_URL": dsn}), &stderr)
	}()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var eventType, scopeID string
	var readErr, ferr, cerr error
	testkit.Eventually(t, 30*time.Second, func() bool {
		readErr = pool.QueryRow(ctx, `SELECT event_type, scope_id FROM pginbox_receipts_live WHERE message_id = $1`, good.ID.String()).Scan(&eventType, &scopeID)
		_, ferr = rdb.ZScore(ctx, bullmq.DefaultPrefix+":"+queue+":failed", nameless.ID.String()).Result()
		_, cerr = rdb.ZScore(ctx, bullmq.DefaultPrefix+":"+queue+":completed", good.ID.String()).Result()
		return readErr == nil && ferr == nil && cerr == nil
	}, "the receipt, the completion and the failure; saw %v\n%v", testkit.Lazy(func() string { return fmt.Sprintf("%v, %v, %v", readErr, cerr, ferr) }),
		testkit.Lazy(stderr.String))
	if eventType != "order.created" || scopeID != "acme" {
		t.Fatalf("receipt: event type %q, scope %q", eventType, scopeID)
	}
	reason, err := rdb.HGet(ctx, bullmq.DefaultPrefix+":"+queue+":"+nameless.ID.String(), "failedReason").Result()
	if err != nil || !strings.Contains(reason, "give the job a name") {
		t.Fatalf("failedReason %q, %v", reason, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != brokercmd.ExitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not stop after cancel")
	}
}
