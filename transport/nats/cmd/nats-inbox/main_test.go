package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/nats/internal/natstest"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	base := []string{"-stream", "S", "-dead-letter-subject", "d", "-tenant", "t", "-source", "s", "-consumer", "c"}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{base, nil, "-database-url (or DATABASE_URL) is required"},
		{[]string{"-database-url", "x"}, nil, "-stream is required"},
		{[]string{"-database-url", "x", "-stream", "S"}, nil, "-dead-letter-subject is required"},
		{[]string{"-stream", "S", "-dead-letter-subject", "d", "-source", "s", "-consumer", "c"}, map[string]string{"DATABASE_URL": "x"}, "-tenant or -global is required"},
		{append(base, "-global"), map[string]string{"DATABASE_URL": "x"}, "-tenant and -global exclude each other"},
		{[]string{"-stream", "S", "-dead-letter-subject", "d", "-tenant", "t", "-consumer", "c"}, map[string]string{"DATABASE_URL": "x"}, "-source is required"},
		{[]string{"-stream", "S", "-dead-letter-subject", "d", "-tenant", "t", "-source", "s"}, map[string]string{"DATABASE_URL": "x"}, "-consumer is required"},
		{append(base, "extra"), map[string]string{"DATABASE_URL": "x"}, `unexpected argument "extra"`},
		{[]string{"-no-such-flag"}, nil, "flag provided but not defined"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), tc.args, env(tc.env), &stderr); code != brokercmd.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), brokercmd.ExitUsage, tc.want)
		}
	}
	var stderr bytes.Buffer
	if code := program.Run(context.Background(), []string{"-help"}, env(nil), &stderr); code != brokercmd.ExitOK || !strings.Contains(stderr.String(), "-dead-letter-subject") {
		t.Errorf("-help: exit %d, stderr %q", code, stderr.String())
	}
}

func TestSchemaNotMigrated(t *testing.T) {
	t.Parallel()
	dsn := inboxtest.Database(t) + " search_path=no_pginbox_here" // the tables are in public: invisible here
	var stderr bytes.Buffer
	args := []string{"-database-url", dsn, "-stream", "S", "-dead-letter-subject", "d", "-tenant", "t", "-source", "s", "-consumer", "c"}
	if code := program.Run(context.Background(), args, env(nil), &stderr); code != brokercmd.ExitError || !strings.Contains(stderr.String(), "run `inbox migrate up`") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// The program accepts a published message (event type = subject, message ID
// = Nats-Msg-Id, scope from -tenant) and exits 0 on cancel.
func TestRunAccepts(t *testing.T) {
	t.Parallel()
	url := brokertest.Require(t, brokertest.NATS)
	dsn := inboxtest.Database(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // after the stream's deletion: cleanups run last first
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := strings.ReplaceAll(t.Name(), "/", "_") + time.Now().Format("150405.000000")
	id = strings.ReplaceAll(id, ".", "_")
	stream, subject := "PGI_CMD_"+id, "pgi.cmd."+id
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}})
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject + ".order.created", Data: []byte(`{"orderId":"o-1"}`),
		Header: nats.Header{jetstream.MsgIDHeader: []string{"evt-1"}}}); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	var stderr testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- program.Run(runCtx, []string{"-nats-url", url, "-stream", stream, "-dead-letter-subject", subject + ".dead",
			"-tenant", "acme", "-source", "shop", "-consumer", "orders.projection.v1"},
			env(map[string]string{"DATABASE_URL": dsn}), &stderr)
	}()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var eventType, scopeID string
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		return pool.QueryRow(ctx, `SELECT event_type, scope_id FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&eventType, &scopeID)
	}, "the receipt; the program's log:\n%v", testkit.Lazy(stderr.String))
	if eventType != subject+".order.created" || scopeID != "acme" {
		t.Fatalf("receipt: event type %q, scope %q", eventType, scopeID)
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
