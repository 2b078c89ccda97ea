package drills

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/testkit"
)

// TestDrillKilledBackends terminates a random pginbox session (accepts,
// handler transactions, claims, heartbeats, LISTEN) several times a second
// while accepts and a worker run: nothing is lost or applied twice, the
// worker keeps draining and its LISTEN session comes back. The smoke version
// is shorter.
func TestDrillKilledBackends(t *testing.T) {
	count, rate := size(3000, 300), size(150.0, 150.0)
	const every = 200 * time.Millisecond // five kills a second
	c := startCluster(t, nil)
	admin, dsn := prepare(t, c)
	a := startApp(t, dsn, appConfig{})
	testkit.Eventually(t, 10*time.Second, func() bool { return listening(t, admin) }, "the worker to LISTEN")

	load := a.load(t, count, rate)
	// Something to kill: the accepts have sessions of their own.
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", appAccept).Scan(&n)
		return err == nil && n > 0
	}, "accept sessions to exist")
	ctx, stopKilling := context.WithCancel(t.Context())
	killed := make(chan map[string]int, 1)
	go func() {
		byApp := map[string]int{}
		defer func() { killed <- byApp }()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// One random session of the application, whatever it does now;
			// every fifth time the worker's LISTEN session, and the two times
			// after it an accept's, then a worker's: a short run picking at
			// random could miss one of them (it did, 1 run in 12).
			victim := `SELECT pid FROM pg_stat_activity WHERE application_name = ANY ($1) ORDER BY random() LIMIT 1`
			apps := []string{appAccept, appWorker}
			switch n % 5 {
			case 0:
				victim = `SELECT pid FROM pg_stat_activity WHERE application_name = ANY ($1) AND query LIKE '%LISTEN pginbox_receipt%' AND state = 'idle'`
			case 1:
				apps = []string{appAccept}
			case 2:
				apps = []string{appWorker}
			}
			var pid int
			var app, query string
			err := admin.QueryRow(ctx, `SELECT pid, application_name, query FROM pg_stat_activity WHERE pid = (`+victim+`)`,
				apps).Scan(&pid, &app, &query)
			// Counted only when the backend is gone: pg_terminate_backend
			// with a timeout waits for it to exit and says whether it did.
			var gone bool
			if err == nil {
				err = admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&gone)
			}
			if err == nil && gone {
				byApp[app]++
				if strings.Contains(query, "LISTEN pginbox_receipt") {
					byApp["listen"]++
				}
			}
		}
	}()
	waitAcked(t, load, count*9/10)
	stopKilling()
	kills := <-killed
	stopped := time.Now()
	relisten := testkit.Eventually(t, 30*time.Second, func() bool { return listening(t, admin) }, "the worker to LISTEN again")
	recovery := firstAckAfter(t, load, stopped).Sub(stopped)
	finish(t, "killed-backends", admin, load, recovery,
		fmt.Sprintf("killed_accept=%d killed_worker=%d killed_listen=%d listen_back_after=%s worker_warnings=%d",
			kills[appAccept], kills[appWorker], kills["listen"], relisten.Round(time.Millisecond), a.logs.total()))
	if kills[appAccept] == 0 || kills[appWorker] == 0 || kills["listen"] == 0 {
		t.Errorf("kills: %v; the drill must hit the accepts, the worker and its LISTEN session", kills)
	}
}
