package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/testkit"
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
	base := []string{"-stream", "s", "-dead-letter-stream", "d", "-tenant", "t", "-source", "s", "-consumer", "c"}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{base, nil, "-database-url (or DATABASE_URL) is required"},
		{[]string{"-database-url", "x"}, nil, "-stream is required"},
		{[]string{"-database-url", "x", "-stream", "s"}, nil, "-dead-letter-stream is required"},
		{[]string{"-stream", "s", "-dead-letter-stream", "d", "-source", "s", "-consumer", "c"}, db, "-tenant or -global is required"},
		{append(base, "-global"), db, "-tenant and -global exclude each other"},
		{[]string{"-stream", "s", "-dead-letter-stream", "d", "-tenant", "t", "-consumer", "c"}, db, "-source is required"},
		{[]string{"-stream", "s", "-dead-letter-stream", "d", "-tenant", "t", "-source", "s"}, db, "-consumer is required"},
		{append(base, "extra"), db, `unexpected argument "extra"`},
		{[]string{"-claim-idle", "soon"}, nil, "invalid value"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), tc.args, env(tc.env), &stderr); code != brokercmd.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), brokercmd.ExitUsage, tc.want)
		}
	}
	var stderr bytes.Buffer
	if code := program.Run(context.Background(), []string{"-help"}, env(nil), &stderr); code != brokercmd.ExitOK || !strings.Contains(stderr.String(), "-dead-letter-stream") {
		t.Errorf("-help: exit %d, stderr %q", code, stderr.String())
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	args := []string{"-stream", "s", "-dead-letter-stream", "d", "-tenant", "t", "-source", "s", "-consumer", "c"}
	cases := []struct {
		extra []string
		want  string
	}{
		// The tables are in public, invisible on this search path.
		{[]string{"-database-url", inboxtest.Database(t) + " search_path=no_pginbox_here"}, "run `inbox migrate up`"},
		{[]string{"-database-url", "x", "-redis-url", "http://nope"}, "-redis-url: "},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), append(args, tc.extra...), env(nil), &stderr); code != brokercmd.ExitError || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.extra, code, stderr.String(), brokercmd.ExitError, tc.want)
		}
	}
}

// The program accepts an entry (event type from its type field, message ID
// from message_id, scope from -tenant), dead-letters one without a type, and
// exits 0 on cancel.
func TestRunAccepts(t *testing.T) {
	t.Parallel()
	addr := brokertest.Require(t, brokertest.Redis)
	dsn := inboxtest.Database(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	stream := "pgi:cmd:" + time.Now().Format("150405.000000000")
	dead := stream + ":dead"
	defer rdb.Del(ctx, stream, dead)
	for _, values := range []map[string]any{
		{"message_id": "evt-1", "type": "order.created", "payload": `{"orderId":"o-1"}`},
		{"message_id": "evt-2", "payload": `{"orderId":"o-2"}`},
	} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	var stderr testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- program.Run(runCtx, []string{"-redis-url", "redis://" + addr + "/0", "-stream", stream, "-dead-letter-stream", dead,
			"-tenant", "acme", "-source", "shop", "-consumer", "orders.projection.v1"},
			env(map[string]string{"DATABASE_URL": dsn}), &stderr)
	}()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var eventType, scopeID string
	var readErr error
	var n int64
	testkit.Eventually(t, 30*time.Second, func() bool {
		readErr = pool.QueryRow(ctx, `SELECT event_type, scope_id FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&eventType, &scopeID)
		n, _ = rdb.XLen(ctx, dead).Result()
		return readErr == nil && n == 1
	}, "the receipt and the dead letter; saw %v\n%v", testkit.Lazy(func() string { return fmt.Sprintf("%v, %d dead letters", readErr, n) }),
		testkit.Lazy(stderr.String))
	if eventType != "order.created" || scopeID != "acme" {
		t.Fatalf("receipt: event type %q, scope %q", eventType, scopeID)
	}
	dl, err := rdb.XRange(ctx, dead, "-", "+").Result()
	if err != nil || len(dl) != 1 || !strings.Contains(dl[0].Values["pginbox-error"].(string), `add a "type" field`) {
		t.Fatalf("dead letter %v, %v", dl, err)
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
