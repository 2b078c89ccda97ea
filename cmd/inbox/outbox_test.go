package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// outboxFixture is a database whose outbox holds events in every state.
type outboxFixture struct {
	db                      map[string]string // the environment pointing at it
	pending, dead, old, new outbox.ID
	retrying                outbox.ID
}

func newOutboxFixture(t *testing.T) *outboxFixture {
	t.Helper()
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	var ids []outbox.ID
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i, dest := range []string{"billing.v1", "billing.v1", "billing.v1", "shipping.v1", "billing.v1"} {
			id, err := outbox.Emit(ctx, tx, outbox.Event{
				Type: "order.confirmed", SchemaVersion: 1, Source: "orders", Destination: dest, OrderingKey: "o-1",
				Payload: map[string]any{"orderId": "o-1", "n": i}, Metadata: map[string]string{"causation_id": "evt-1"},
			})
			ids = append(ids, id)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &outboxFixture{db: map[string]string{"DATABASE_URL": pool.Config().ConnString()},
		pending: ids[0], dead: ids[1], old: ids[2], new: ids[3], retrying: ids[4]}
	for _, u := range []struct {
		id  outbox.ID
		set string
	}{
		{f.dead, "status = 'DEAD', attempts = 10, version = 12, last_error = 'broker said: no such exchange'"},
		{f.old, "status = 'PUBLISHED', attempts = 1, published_at = now() - interval '3 days'"},
		{f.new, "status = 'PUBLISHED', attempts = 1, published_at = now()"},
		{f.retrying, "attempts = 2, available_at = now() + interval '1 hour', last_error = 'timeout'"},
	} {
		if _, err := pool.Exec(ctx, "UPDATE pginbox_outbox SET "+u.set+" WHERE id = $1", u.id); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newOutboxFixture(t)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runIn(t, f.db, append([]string{"outbox"}, args...)...)
	}

	code, out, errOut := run("stats")
	is.Equal(code, exitOK)
	is.Equal(errOut, "")
	is.True(strings.Contains(out, "DESTINATION  PENDING  RETRYING  PUBLISHING  DEAD  PUBLISHED  DUE  OLDEST DUE"))
	is.True(strings.Contains(out, "billing.v1   2        1         0           1     -          1"))
	is.True(strings.Contains(out, "dead: 1"))

	code, out, _ = run("stats", "--json", "--published")
	is.Equal(code, exitOK)
	var st map[string]any
	is.NoErr(json.Unmarshal([]byte(out), &st))
	is.Equal(st["dead"], 1.0)
	dests := st["destinations"].([]any)
	is.Equal(len(dests), 2)
	billing, shipping := dests[0].(map[string]any), dests[1].(map[string]any)
	is.Equal(billing["published"], 1.0)
	is.Equal(billing["retrying"], 1.0)
	is.Equal(shipping["published"], 1.0)
	is.Equal(shipping["oldest_due_age_seconds"], nil) // nothing due there

	code, out, _ = run("list", "--status", "dead,pending")
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, f.dead.String()+"  DEAD"))
	is.True(strings.Contains(out, f.pending.String()+"  PENDING"))
	is.True(!strings.Contains(out, f.old.String()))
	code, out, _ = run("list", "--limit", "2", "--json")
	is.Equal(code, exitOK)
	var page struct {
		Events []map[string]any `json:"events"`
		Next   string           `json:"next"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &page))
	is.Equal(len(page.Events), 2)
	is.Equal(page.Next, f.dead.String())
	is.Equal(page.Events[0]["ordering_key"], "o-1")
	code, out, _ = run("list", "--after", page.Next, "--destination", "shipping.v1")
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, f.new.String()))
	is.Equal(strings.Count(out, "\n"), 2) // header and one event

	code, out, _ = run("show", f.dead.String())
	is.Equal(code, exitOK)
	for _, want := range []string{"status        DEAD", "version       12", "last error    broker said: no such exchange",
		`metadata      {"causation_id":"evt-1"}`, `"orderId": "o-1"`, "ordering key  o-1 (emit order 2)"} {
		is.True(strings.Contains(out, want)) // show prints the event's state
	}
	code, out, _ = run("show", f.dead.String(), "--json")
	is.Equal(code, exitOK)
	var ev map[string]any
	is.NoErr(json.Unmarshal([]byte(out), &ev))
	is.Equal(ev["payload"], map[string]any{"n": 1.0, "orderId": "o-1"})
	is.Equal(ev["version"], 12.0)

	// Requeue at a stale version is refused; at the shown one it goes.
	code, _, errOut = run("requeue", f.dead.String(), "--version", "11")
	is.Equal(code, exitRefused)
	is.True(strings.Contains(errOut, "inbox outbox requeue: outbox event version conflict"))
	is.True(strings.Contains(errOut, "retry with version 12"))
	is.True(strings.Contains(errOut, "hint: run `inbox outbox show ID`"))
	code, _, errOut = run("requeue", f.new.String(), "--version", "1")
	is.Equal(code, exitRefused)
	is.True(strings.Contains(errOut, "it is PUBLISHED, requeue needs DEAD"))
	code, _, errOut = run("requeue", "01J0000000000000000000000A", "--version", "1")
	is.Equal(code, exitNotFound)
	is.True(strings.Contains(errOut, "hint: check the ID with `inbox outbox list`"))
	code, out, _ = run("requeue", f.dead.String(), "--version", "12")
	is.Equal(code, exitOK)
	is.Equal(out, "requeued "+f.dead.String()+": DEAD -> PENDING, version 12 -> 13\n")

	code, out, _ = run("purge", "--older-than", "2d", "--dry-run")
	is.Equal(code, exitOK)
	is.True(strings.HasPrefix(out, "dry run: would delete 1 event published before "))
	code, out, _ = run("purge", "--older-than", "2d", "--json")
	is.Equal(code, exitOK)
	var purge map[string]any
	is.NoErr(json.Unmarshal([]byte(out), &purge))
	is.Equal(purge["deleted"], 1.0)
	is.Equal(purge["dry_run"], false)
	code, _, errOut = run("show", f.old.String())
	is.Equal(code, exitNotFound) // deleted
	is.True(strings.Contains(errOut, "outbox event not found"))
}

func TestOutboxUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"outbox"}, exitUsage, "Usage: inbox outbox stats|list|show|requeue|purge"},
		{[]string{"outbox", "frob"}, exitUsage, `unknown subcommand "frob"`},
		{[]string{"outbox", "stats"}, exitUsage, "inbox outbox stats: no database: pass --database-url or set DATABASE_URL"},
		{[]string{"outbox", "list", "--status", "done", "--database-url", "x"}, exitUsage, `--status "done": want statuses separated by commas: PENDING, PUBLISHING, PUBLISHED, DEAD`},
		{[]string{"outbox", "show", "--database-url", "x"}, exitUsage, "inbox outbox show: want one event ID"},
		{[]string{"outbox", "show", "nope", "--database-url", "x"}, exitUsage, `"nope": want a receipt ID`},
		{[]string{"outbox", "requeue", "01J0000000000000000000000A", "--database-url", "x"}, exitUsage, "--version is required"},
		{[]string{"outbox", "purge", "--database-url", "x"}, exitUsage, "--older-than is required"},
		{[]string{"outbox", "purge", "--older-than", "0s", "--database-url", "x"}, exitUsage, "want a positive age"},
		{[]string{"outbox", "stats", "--tenant", "a"}, exitUsage, "unknown flag --tenant"},
	} {
		code, _, stderr := runIn(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("inbox %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	is := is.New(t)
	code, out, _ := runIn(t, nil, "help", "outbox", "purge")
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, "Usage: inbox outbox purge --older-than AGE"))
	is.True(strings.Contains(out, "\n  --batch-size N\n"))
	code, out, _ = runIn(t, nil, "help", "outbox")
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, "outbox requeue  send a DEAD event back to PENDING"))
	code, out, _ = runIn(t, nil, "outbox", "list", "-h")
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, "Usage: inbox outbox list"))
}
