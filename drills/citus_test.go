package drills

import (
	"fmt"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// The Citus drills run accepts for many tenants spread over both worker
// nodes and a running worker whose handler writes a business table
// colocated with pginbox's (no unique key, so a double shows), while a
// node fails. Each then counts: every message sent is acknowledged, none
// lost, none applied twice. Each runs twice: with the client and the
// worker on the coordinator, and with their sessions on the worker nodes
// (inbox.Nodes). They run with `make drills` only: each starts a
// three-node cluster.

const citusTenants = 16

// citusSize is the drills' load: messages and accepts per second.
func citusSize() (int, float64) { return size(3000, 600), size(150.0, 100.0) }

// TestDrillCitusKillWorker kills a worker node's postmaster (SIGKILL, its
// backends left to exit) mid-drain and starts it again: crash recovery on
// that node, accepts and claims of its tenants fail meanwhile and are
// redelivered or reclaimed.
func TestDrillCitusKillWorker(t *testing.T) {
	requireFull(t)
	for _, mode := range sessionModes {
		t.Run(mode, func(t *testing.T) {
			count, rate := citusSize()
			e := startCitusEnv(t, citusTenants, mode)
			e.load(t, count, rate)
			e.waitAcked(t, count/3)
			victim := e.c.Workers[0]
			pid := victim.Pid()
			t0 := time.Now()
			if err := victim.Shutdown(pgcluster.ShutdownKill); err != nil {
				t.Fatal(err)
			}
			down := time.Now()
			if err := victim.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			ready := time.Now()
			if victim.Pid() == pid {
				t.Fatalf("the worker node's postmaster (pid %d) was not replaced", pid)
			}
			recovery := e.firstAckAfter(t, 0, ready).Sub(t0)
			e.finish(t, "citus-kill-worker-"+mode, recovery, fmt.Sprintf("kill=%s start=%s", down.Sub(t0).Round(time.Millisecond), ready.Sub(down).Round(time.Millisecond)))
			if e.failed(0) == 0 {
				t.Errorf("no accept of the killed node's tenants met the kill: the drill proved nothing")
			}
		})
	}
}

// TestDrillCitusRestartCoordinator restarts the coordinator (fast
// shutdown) mid-drain. Through the coordinator, every session of the
// client and the worker breaks, the worker reconnects and LISTENs again.
// With sessions on the worker nodes, only the worker's LISTEN session on
// the coordinator breaks: accepts go on being acknowledged meanwhile.
func TestDrillCitusRestartCoordinator(t *testing.T) {
	requireFull(t)
	for _, mode := range sessionModes {
		t.Run(mode, func(t *testing.T) {
			count, rate := citusSize()
			e := startCitusEnv(t, citusTenants, mode)
			e.load(t, count, rate)
			e.waitAcked(t, count/3)
			t0 := time.Now()
			if err := e.c.Coordinator.Restart(t.Context(), pgcluster.ShutdownFast); err != nil {
				t.Fatal(err)
			}
			ready := time.Now()
			relisten := testkit.Eventually(t, 30*time.Second, func() bool { return listening(t, e.admin) }, "the worker to LISTEN again")
			a, b := e.firstAckAfter(t, 0, ready), e.firstAckAfter(t, 1, ready)
			if b.After(a) {
				a = b
			}
			recovery := a.Sub(t0) // both nodes' tenants acknowledged again
			e.finish(t, "citus-restart-coordinator-"+mode, recovery,
				fmt.Sprintf("restart=%s listen_back_after=%s", ready.Sub(t0).Round(time.Millisecond), relisten.Round(time.Millisecond)))
			during := e.ackedBetween(0, t0, ready) + e.ackedBetween(1, t0, ready)
			switch {
			case e.onNodes && during == 0:
				t.Errorf("no accept was acknowledged while the coordinator restarted (%s), with the sessions on the worker nodes", ready.Sub(t0).Round(time.Millisecond))
			case !e.onNodes && e.failed(0)+e.failed(1) == 0:
				t.Errorf("no accept met the restart: the drill proved nothing")
			}
		})
	}
}

// TestDrillCitusStopWorker stops one worker node for a while: its tenants'
// accepts fail and are redelivered until it is back, while the other
// node's tenants keep flowing (accepts acknowledged and messages applied
// during the outage): Accept runs on the scope's node alone, and the
// worker's claim round survives its failed discovery read (every shard) by
// claiming from the scopes it listed recently.
func TestDrillCitusStopWorker(t *testing.T) {
	requireFull(t)
	for _, mode := range sessionModes {
		t.Run(mode, func(t *testing.T) {
			count, rate := citusSize()
			outage := 15 * time.Second
			e := startCitusEnv(t, citusTenants, mode)
			e.load(t, count, rate)
			e.waitAcked(t, count/4)
			victim := e.c.Workers[0]
			t0 := time.Now()
			if err := victim.Shutdown(pgcluster.ShutdownFast); err != nil {
				t.Fatal(err)
			}
			time.Sleep(outage) // the outage's length is the fault the load meets
			back := time.Now()
			if err := victim.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			ready := time.Now()
			// The first second lets in-flight work of the stopped node fail.
			from := t0.Add(time.Second)
			otherAcked, otherApplied := e.ackedBetween(1, from, back), e.applied.between(e.tenants[1], from, back)
			victimAcked := e.ackedBetween(0, from, back)
			recovery := e.firstAckAfter(t, 0, ready).Sub(ready)
			e.finish(t, "citus-stop-worker-"+mode, recovery, fmt.Sprintf("outage=%s start=%s during_outage: other_node_acked=%d other_node_applied=%d stopped_node_acked=%d",
				back.Sub(t0).Round(time.Millisecond), ready.Sub(back).Round(time.Millisecond), otherAcked, otherApplied, victimAcked))
			if otherAcked == 0 || otherApplied == 0 {
				t.Errorf("the other node's tenants stopped during the outage: %d accepts acknowledged, %d messages applied", otherAcked, otherApplied)
			}
			if victimAcked != 0 {
				t.Errorf("%d accepts of the stopped node's tenants were acknowledged while it was down: was it down?", victimAcked)
			}
			if e.failed(0) == 0 {
				t.Errorf("no accept of the stopped node's tenants failed: the drill proved nothing")
			}
		})
	}
}

// TestDrillCitusMoveShard moves the shard of one tenant (with pginbox's
// and the business table's colocated shards) to the other worker node
// online (citus_move_shard_placement, logical replication) during a drain.
func TestDrillCitusMoveShard(t *testing.T) {
	requireFull(t)
	for _, mode := range sessionModes {
		t.Run(mode, func(t *testing.T) {
			count, rate := citusSize()
			e := startCitusEnv(t, citusTenants, mode)
			e.load(t, count, rate)
			e.waitAcked(t, count/3)
			tenant := e.tenants[0][0]
			shard, from, err := e.c.ShardOf(t.Context(), citusDB, "pginbox_receipts", tenant)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if _, err := e.c.MoveShard(t.Context(), citusDB, shard, e.c.Workers[1]); err != nil {
				t.Fatal(err)
			}
			moved := time.Now()
			for _, table := range []string{"pginbox_receipts", "pginbox_work", "drill_effects"} {
				if _, to, err := e.c.ShardOf(t.Context(), citusDB, table, tenant); err != nil || to != e.c.Workers[1] || from != e.c.Workers[0] {
					t.Fatalf("%s's shard of %s did not move from worker 0 to worker 1 (now on port %d, err %v)", table, tenant, to.Port(), err)
				}
			}
			recovery := e.firstAckAfter(t, 0, moved).Sub(moved)
			e.finish(t, "citus-move-shard-"+mode, recovery, fmt.Sprintf("move=%s shard=%d moved_tenant_applied_after_move=%d",
				moved.Sub(t0).Round(time.Millisecond), shard, e.applied.between([]string{tenant}, moved, time.Now())))
			if e.applied.between([]string{tenant}, moved, time.Now()) == 0 {
				t.Errorf("no message of %s was applied after its shard moved: the drill proved nothing about the move", tenant)
			}
		})
	}
}
