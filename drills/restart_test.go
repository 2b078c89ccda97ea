package drills

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// TestDrillRestart restarts the server (pg_ctl restart -m fast, then -m
// immediate) while accepts and a worker run. Accepts in flight get a
// retryable error or ErrCommitUncertain and are redelivered; the worker
// reconnects, re-establishes LISTEN, and nothing acknowledged is lost or
// applied twice. The smoke version runs the fast restart only.
func TestDrillRestart(t *testing.T) {
	modes := []pgcluster.ShutdownMode{pgcluster.ShutdownFast}
	if full() {
		modes = append(modes, pgcluster.ShutdownImmediate)
	}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) { restartDrill(t, mode) })
	}
}

func restartDrill(t *testing.T, mode pgcluster.ShutdownMode) {
	count, rate := size(3000, 400), size(150.0, 200.0)
	c := startCluster(t, nil)
	admin, dsn := prepare(t, c)
	a := startApp(t, dsn, appConfig{})
	testkit.Eventually(t, 10*time.Second, func() bool { return listening(t, admin) }, "the worker to LISTEN")

	load := a.load(t, count, rate)
	waitAcked(t, load, count/3)
	// The restart can only break sessions that exist: the accepts' and
	// the worker's are open now.
	startedBefore := postmasterStart(t, admin)
	if n := appSessions(t, admin); n == 0 {
		t.Fatal("the application has no sessions before the restart")
	}
	t0 := time.Now()
	if err := c.Restart(t.Context(), mode); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	// The server really restarted: a new postmaster.
	if startedAfter := postmasterStart(t, admin); !startedAfter.After(startedBefore) {
		t.Errorf("the postmaster start time did not move (%s, before %s): the server did not restart", startedAfter, startedBefore)
	}
	relisten := testkit.Eventually(t, 30*time.Second, func() bool { return listening(t, admin) }, "the worker to LISTEN again")
	recovery := firstAckAfter(t, load, ready).Sub(t0)
	finish(t, "restart-"+mode.String(), admin, load, recovery,
		fmt.Sprintf("restart=%s listen_back_after=%s", ready.Sub(t0).Round(time.Millisecond), relisten.Round(time.Millisecond)))
	if out := load.Snapshot(); out.Uncertain+out.Retryable == 0 {
		t.Errorf("no accept met the restart: the drill proved nothing")
	}
}

// postmasterStart is when the server's postmaster started.
func postmasterStart(t *testing.T, admin *pgxpool.Pool) time.Time {
	t.Helper()
	var at time.Time
	// The pool's first tries after a restart may meet dead sessions.
	testkit.EventuallyNoError(t, 5*time.Second, func() error {
		return admin.QueryRow(t.Context(), "SELECT pg_postmaster_start_time()").Scan(&at)
	}, "the postmaster's start time")
	return at
}
