package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

// runIn runs a command line in-process with the given environment.
func runIn(t *testing.T, environ map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string { return environ[k] }, currentUser: user.Current}
	code = e.run(context.Background(), args)
	return code, out.String(), errOut.String()
}

// fixture is a migrated database with receipts in several states.
type fixture struct {
	dsn       string
	pool      *pgxpool.Pool
	dead      inbox.ID // tenant-a, DEAD at version 3
	completed inbox.ID // tenant-a, COMPLETED 40 days ago at version 4
	other     inbox.ID // tenant-b, DEAD
	pending   inbox.ID // global, PENDING
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	accept := func(scope inbox.Scope, id string) inbox.ID {
		res, err := c.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: scope, Source: "shop", Consumer: "orders.projection.v1", MessageID: id},
			EventType: "order.placed", SchemaVersion: 1,
			Payload: map[string]string{"orderId": id},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	f := &fixture{dsn: dsn, pool: pool}
	f.dead = accept(inbox.Tenant("tenant-a"), "evt-1")
	f.completed = accept(inbox.Tenant("tenant-a"), "evt-2")
	f.other = accept(inbox.Tenant("tenant-b"), "evt-1")
	f.pending = accept(inbox.Global(), "evt-3")
	for _, u := range []struct {
		id  inbox.ID
		set string
	}{
		{f.dead, "status = 'DEAD', attempts = 1, version = 3, last_error = 'unsupported currency'"},
		{f.completed, "status = 'COMPLETED', attempts = 1, version = 4, completed_at = now() - interval '40 days'"},
		{f.other, "status = 'DEAD', version = 3"},
	} {
		inboxtest.SetState(t, pool, u.id, u.set)
	}
	return f
}

func TestUsageErrors(t *testing.T) {
	is := is.New(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "Commands:"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"stats"}, exitUsage, "no database: pass --database-url or set DATABASE_URL"},
		{[]string{"stats", "--bogus"}, exitUsage, "unknown flag --bogus"},
		{[]string{"stats", "--tenant", "a", "--global", "--database-url", "x"}, exitUsage, "--tenant and --global exclude each other"},
		{[]string{"show"}, exitUsage, "want one receipt ID"},
		{[]string{"list", "--tenant", "", "--database-url", "x"}, exitUsage, `--tenant "": want a tenant ID, not an empty string`},
		{[]string{"show", "nope", "--database-url", "x"}, exitUsage, `"nope": want a receipt ID`},
		{[]string{"requeue", "01J0000000000000000000000A", "--reason", "r", "--database-url", "x"}, exitUsage, "--version is required"},
		{[]string{"requeue", "01J0000000000000000000000A", "--version", "2", "--database-url", "x"}, exitUsage, "--reason is required"},
		{[]string{"purge", "--database-url", "x"}, exitUsage, "--older-than is required"},
		{[]string{"purge", "--older-than", "soon", "--database-url", "x"}, exitUsage, `--older-than "soon": want a positive age like 720h`},
		{[]string{"migrate", "sideways", "--database-url", "x"}, exitUsage, `unknown action "sideways"`},
		{[]string{"list", "--limit", "0", "--database-url", "x"}, exitUsage, `--limit "0": want a whole number from 1 to 1000`},
		{[]string{"stats", "--database-url", "postgres://%zz"}, exitUsage, "not a valid PostgreSQL connection string"},
	} {
		code, _, stderr := runIn(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("inbox %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}

	code, stdout, _ := runIn(t, nil, "help")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "Exit codes:"))
	is.True(strings.Contains(stdout, "schema not migrated"))
	code, stdout, _ = runIn(t, nil, "help", "purge")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "\n  --batch-size N\n"))
	code, stdout, _ = runIn(t, nil, "requeue", "-h")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "Usage: inbox requeue"))
}

func TestParseAgeAndTime(t *testing.T) {
	is := is.New(t)
	for in, want := range map[string]time.Duration{
		"720h": 720 * time.Hour, "30d": 30 * 24 * time.Hour, "90m": 90 * time.Minute, "0d": 0, "36500d": maxAge, "876000h": maxAge,
	} {
		got, err := parseAge(in)
		is.NoErr(err)
		is.Equal(got, want)
	}
	// 213504d is 2^64 ns plus 25 minutes: multiplied unchecked it wraps around
	// to 25 minutes. 106752d wraps to a negative duration.
	for _, bad := range []string{"", "d", "1.5d", "-3d", "+3d", "x", "-1h", "36501d", "876001h", "213504d", "106752d",
		"99999999999999999999d", "2562048h"} {
		_, err := parseAge(bad)
		is.True(err != nil) // parseAge accepted a bad age
	}
	now := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	got, err := parseTime("7d", now)
	is.NoErr(err)
	is.Equal(got, now.Add(-7*24*time.Hour))
	got, err = parseTime("2024-05-01", now)
	is.NoErr(err)
	is.Equal(got, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC))
	got, err = parseTime("2024-05-01T10:00:00+02:00", now)
	is.NoErr(err)
	is.True(got.Equal(time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)))
	for _, bad := range []string{"213504d", "-7d", "yesterday", "2024-13-01"} {
		_, err := parseTime(bad, now)
		is.True(err != nil) // parseTime accepted a bad time
	}
}

func TestFmtAge(t *testing.T) {
	is := is.New(t)
	is.Equal(fmtAge(850*time.Millisecond), "850ms")
	is.Equal(fmtAge(42*time.Second), "42.0s")
	is.Equal(fmtAge(185*time.Second), "3m05s")
	is.Equal(fmtAge(130*time.Minute), "2h10m")
	is.Equal(fmtAge(99*time.Hour), "4d03h")
}

func TestCommandsInProcess(t *testing.T) {
	is := is.New(t)
	f := newFixture(t)
	db := map[string]string{"DATABASE_URL": f.dsn, "USER": "tester"}

	// stats: a table by default, JSON on request.
	code, stdout, stderr := runIn(t, db, "stats", "--completed")
	is.Equal(code, exitOK)
	is.Equal(stderr, "")
	is.True(strings.Contains(stdout, "orders.projection.v1"))
	is.True(strings.Contains(stdout, "dead: 2"))
	code, stdout, _ = runIn(t, db, "stats", "--json", "--tenant", "tenant-a")
	is.Equal(code, exitOK)
	var st jsonStats
	is.NoErr(json.Unmarshal([]byte(stdout), &st))
	is.Equal(st.Scope, jsonScope{Kind: "tenant", ID: "tenant-a"})
	is.Equal(st.Dead, int64(1))
	is.Equal(st.Consumers[0].Completed, nil) // not counted without --completed

	// list: scopes and filters.
	code, stdout, _ = runIn(t, db, "list", "--json", "--tenant", "tenant-a")
	is.Equal(code, exitOK)
	var page jsonList
	is.NoErr(json.Unmarshal([]byte(stdout), &page))
	is.Equal(len(page.Receipts), 2)
	is.Equal(page.Receipts[0].ID, f.dead.String())
	is.Equal(page.Receipts[0].Scope, jsonScope{Kind: "tenant", ID: "tenant-a"})
	code, stdout, _ = runIn(t, db, "list", "--json", "--status", "dead", "--limit", "1")
	is.Equal(code, exitOK)
	is.NoErr(json.Unmarshal([]byte(stdout), &page))
	is.Equal(len(page.Receipts), 1)
	is.Equal(page.Next, f.dead.String())
	code, stdout, _ = runIn(t, db, "list", "--status", "dead", "--limit", "1", "--after", page.Next)
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, f.other.String()))
	is.True(strings.Contains(stdout, "tenant(tenant-b)")) // the operator view shows scopes

	// show: flags after the ID, UUID form accepted.
	code, stdout, _ = runIn(t, db, "show", f.dead.UUIDString(), "--json")
	is.Equal(code, exitOK)
	var d jsonDetails
	is.NoErr(json.Unmarshal([]byte(stdout), &d))
	is.Equal(d.Status, "DEAD")
	is.Equal(d.Version, int64(3))
	is.Equal(d.LastError, "unsupported currency")
	var compact bytes.Buffer
	is.NoErr(json.Compact(&compact, d.Payload))
	is.Equal(compact.String(), `{"orderId":"evt-1"}`)
	is.Equal(len(d.Fingerprint), 64)
	code, _, stderr = runIn(t, db, "show", f.dead.String(), "--tenant", "tenant-b")
	is.Equal(code, exitNotFound)
	is.True(strings.Contains(stderr, "receipt not found"))

	// requeue: stale version refused, current version applied, audited as $USER.
	code, _, stderr = runIn(t, db, "requeue", f.dead.String(), "--version", "2", "--reason", "fixed")
	is.Equal(code, exitRefused)
	is.True(strings.Contains(stderr, "version conflict"))
	is.True(strings.Contains(stderr, "--version 3"))
	code, stdout, _ = runIn(t, db, "requeue", f.dead.String(), "--version", "3", "--reason", "fixed", "--json")
	is.Equal(code, exitOK)
	var rq jsonRequeue
	is.NoErr(json.Unmarshal([]byte(stdout), &rq))
	is.Equal(rq.Version, int64(4))
	code, stdout, _ = runIn(t, db, "show", f.dead.String())
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "requeue  tester"))
	code, _, stderr = runIn(t, db, "requeue", f.completed.String(), "--version", "4", "--reason", "again")
	is.Equal(code, exitRefused)
	is.True(strings.Contains(stderr, "it is COMPLETED"))

	// replay, then purge, then replay is refused.
	code, stdout, _ = runIn(t, db, "replay", f.completed.String(), "--version", "4", "--reason", "rebuild projection", "--actor", "ops")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "replayed "+f.completed.String()))
	code, stdout, _ = runIn(t, db, "purge", "--older-than", "30d", "--dry-run")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "dry run: would purge 1 payload in 1 batch of at most 1000"))
	code, stdout, _ = runIn(t, db, "purge", "--older-than", "720h", "--batch-size", "10", "--json")
	is.Equal(code, exitOK)
	var pr jsonPurge
	is.NoErr(json.Unmarshal([]byte(stdout), &pr))
	is.Equal(pr.Purged, int64(1))
	is.Equal(pr.Batches, 1)
	code, _, stderr = runIn(t, db, "replay", f.completed.String(), "--version", "6", "--reason", "again")
	is.Equal(code, exitRefused)
	is.True(strings.Contains(stderr, "payload was purged"))
}
