package drills

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/drillkit"
)

// TestDrillHeldXmin keeps a transaction that took an XID idle for a minute
// while accepts and a worker run at a fixed rate. Correctness holds; the
// line reports throughput, claim latency and dead row versions in the
// receipts table before, during and after the hold. (`inbox bench
// --scenarios xmin-hold` measures the same with a configurable hold.)
func TestDrillHeldXmin(t *testing.T) {
	requireFull(t)
	c := startCluster(t, nil)
	admin, dsn := prepare(t, c)
	claims := &drillkit.ClaimTimer{}
	a := startApp(t, dsn, appConfig{pool: func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = claims }})
	res, err := drillkit.Hold(t.Context(), drillkit.HoldOptions{
		Client: a.client, Admin: admin, Claims: claims, Rate: 150,
		Before: 15 * time.Second, Hold: time.Minute, After: 15 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, p := range res.Phases {
		t.Log(p)
		phases = append(phases, strings.ReplaceAll(p.String(), " ", ","))
	}
	finish(t, "held-xmin", admin, res.Load, 0, append(phases, fmt.Sprintf("dead_tuples_after_vacuum=%d", res.DeadAfterVacuum))...)
	hold := res.Phases[1]
	if hold.DeadTuplesMax <= res.Phases[0].DeadTuplesMax {
		t.Errorf("dead row versions did not pile up during the hold (%d, before %d): the hold held nothing", hold.DeadTuplesMax, res.Phases[0].DeadTuplesMax)
	}
	if res.DeadAfterVacuum >= hold.DeadTuplesMax {
		t.Errorf("VACUUM after the hold left %d dead row versions of %d", res.DeadAfterVacuum, hold.DeadTuplesMax)
	}
}
