package drills

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/drillkit"
	"github.com/pginbox/pginbox/internal/testkit"
)

// TestDrillConnectionFlood has another client take every connection slot
// but the superuser-reserved ones, and drops the application's sessions:
// Accept fails with a retryable error naming the cause, the worker logs
// its failures without spinning (its connection attempts per second are
// counted), and both recover by themselves once the slots are free.
func TestDrillConnectionFlood(t *testing.T) {
	requireFull(t)
	const count, rate = 2000, 100.0
	const flood = 8 * time.Second
	c := startCluster(t, map[string]string{"max_connections": "40"})
	admin, dsn := prepare(t, c)
	exec1(t, admin, "CREATE ROLE drill_flood LOGIN")
	a := startApp(t, dsn, appConfig{})
	load := a.load(t, count, rate)
	waitAcked(t, load, count/4)

	// Keep the application out while its sessions are dropped and the
	// flood takes every free slot; then only max_connections stops it.
	exec1(t, admin, "ALTER ROLE "+drillkit.AppRole+" CONNECTION LIMIT 0")
	kickApp(t, admin)
	held := holdSlots(t, c.ConnString(drillkit.Database)+" user=drill_flood")
	if len(held) == 0 {
		t.Fatal("the flood holds no connection slot")
	}
	if n := appSessions(t, admin); n != 0 {
		t.Fatalf("the application still has %d sessions: %s", n, sessionList(t, admin))
	}
	exec1(t, admin, "ALTER ROLE "+drillkit.AppRole+" CONNECTION LIMIT -1")
	t0 := time.Now()
	before := load.Snapshot()
	logsBefore, acceptBefore, workerBefore := a.logs.worker(), a.acceptConnects.Load(), a.workerConnects.Load()
	time.Sleep(flood) // the flood's length is the fault: the load meets it for that long
	during := load.Snapshot()
	window := time.Since(t0).Seconds()
	acceptRate := float64(a.acceptConnects.Load()-acceptBefore) / window
	workerRate := float64(a.workerConnects.Load()-workerBefore) / window
	logRate := float64(a.logs.worker()-logsBefore) / window
	attemptRate := float64(during.Attempts-before.Attempts) / window
	for _, conn := range held {
		conn.Close(context.Background())
	}
	released := time.Now()
	recovery := firstAckAfter(t, load, released).Sub(released)

	finish(t, "connection-flood", admin, load, recovery, fmt.Sprintf(
		"slots_held=%d flood=%s too_many_clients=%d accept_calls_per_s=%.1f accept_connects_per_s=%.1f worker_connects_per_s=%.1f worker_logs_per_s=%.1f",
		len(held), flood, during.Codes["53300"]-before.Codes["53300"], attemptRate, acceptRate, workerRate, logRate))
	t.Logf("log lines by message: %v", a.logs.byMessage())
	for _, l := range a.logs.firstLines() {
		t.Logf("worker: %s", l)
	}
	if during.Codes["53300"] == before.Codes["53300"] {
		t.Errorf("no accept failed with too_many_connections (53300) during the flood: the drill proved nothing")
	}
	// pginbox does not retry a connection on its own: one Accept call, at
	// most one connection attempt.
	if acceptRate > attemptRate+1 {
		t.Errorf("the accept pool made %.1f connection attempts a second for %.1f Accept calls a second", acceptRate, attemptRate)
	}
	// The worker retries at its poll interval and lease timers: a few a
	// second, never a busy loop.
	if workerRate > 20 || logRate > 20 {
		t.Errorf("the worker spins without connections: %.1f connection attempts and %.1f log lines a second", workerRate, logRate)
	}
}

// holdSlots opens connections on dsn until the server refuses one for lack
// of slots, and returns them (closed at test end).
func holdSlots(t *testing.T, dsn string) []*pgconn.PgConn {
	t.Helper()
	var held []*pgconn.PgConn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close(context.Background())
		}
	})
	for range 1000 {
		conn, err := pgconn.Connect(t.Context(), dsn)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "53300" {
			return held
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	t.Fatal("the server kept accepting connections")
	return nil
}

// appSessions counts the application's sessions.
func appSessions(t *testing.T, admin *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name IN ($1, $2)", appAccept, appWorker).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sessionList describes the application's sessions, for a failure message.
func sessionList(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	var s string
	err := admin.QueryRow(t.Context(), `SELECT coalesce(string_agg(format('pid %s %s %s/%s since %s: %s', pid, application_name,
			usename, state, backend_start, left(query, 80)), '; '), '') FROM pg_stat_activity WHERE application_name IN ($1, $2)`,
		appAccept, appWorker).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kickApp terminates every session of the application, so it needs new
// ones, until none is seen for 200ms: a backend that passed the connection
// limit before it changed shows up only once its startup ends.
func kickApp(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	var quietSince time.Time
	testkit.Eventually(t, 10*time.Second, func() bool {
		var pids []int32
		err := admin.QueryRow(t.Context(), `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
			WHERE application_name IN ($1, $2) AND pg_terminate_backend(pid)`, appAccept, appWorker).Scan(&pids)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) > 0 || quietSince.IsZero() {
			quietSince = time.Now()
			return false
		}
		return time.Since(quietSince) >= 200*time.Millisecond
	}, "the application's sessions to end")
}
