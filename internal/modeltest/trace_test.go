package modeltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// TestModelTraces replays random traces of the model (scripts/model-traces)
// against PostgreSQL, step by step, and after every step compares the
// database's receipts and work rows with the model's state, and what the
// claims would take with the model's claimable receipts (claimable).
// MODEL_TRACES_DIR replays traces written before instead of generating new
// ones. It never skips: scripts/model-traces installs Quint from
// model/package-lock.json when it is missing (npm ci), and without node and
// npm the test fails saying so.
func TestModelTraces(t *testing.T) {
	dir := os.Getenv("MODEL_TRACES_DIR")
	if dir == "" {
		dir = t.TempDir()
		cmd := exec.Command("bash", "../../scripts/model-traces", dir)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("scripts/model-traces: %v (output above; it installs Quint with `cd model && npm ci`, which needs node and npm: apt-get install nodejs npm)", err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.itf.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces in %s (%v)", dir, err)
	}
	sort.Strings(files)
	steps := map[string]int{}
	outside := map[string]int{} // receipts the claim checks found out of reach, by why
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			tr, err := ReadTrace(f)
			if err != nil {
				t.Fatal(err)
			}
			pool := inboxtest.Pool(t, func(c *pgxpool.Config) {
				c.ConnConfig.RuntimeParams["statement_timeout"] = "5s"
				c.ConnConfig.RuntimeParams["lock_timeout"] = "5s"
			})
			d := newDriver(t, pool)
			// Before the pool closes, which waits for every connection.
			t.Cleanup(func() {
				for w := range d.txs {
					_ = d.end(w, false)
				}
			})
			for i := 1; i < len(tr.States); i++ {
				prev, next := tr.States[i-1], tr.States[i]
				if err := d.apply(prev, next); err != nil {
					t.Fatalf("step %d (%s): %v", i, describe(next.Last), err)
				}
				diffs, err := d.compare(next)
				if err != nil {
					t.Fatalf("step %d: reading the database: %v", i, err)
				}
				claims, err := d.claimable(next)
				if err != nil {
					t.Fatalf("step %d: claiming in a rolled-back transaction: %v", i, err)
				}
				diffs = append(diffs, claims...)
				for _, why := range outOfReach(next) {
					outside[why]++
				}
				for _, df := range diffs {
					t.Errorf("after step %d (%s): %s", i, describe(next.Last), df)
				}
				if len(diffs) > 0 {
					t.FailNow()
				}
				steps[next.Last.Act]++
			}
		})
	}
	t.Logf("%d traces, steps per action: %v; receipts the claims had to leave, summed over the steps: %v", len(files), steps, outside)
}
