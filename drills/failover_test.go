package drills

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/drillkit"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// TestDrillFailover crashes a primary under load and promotes its streaming
// standby; the application reconnects through a two-host DSN with
// target_session_attrs=read-write.
//
// Replication runs through a fault proxy that blackholes it for a second
// before the crash; the drill checks that the standby streamed from the
// proxy and received nothing during that second. The stall counts from a
// fence (every accept acknowledged before it is on the standby), and at
// least stallFloor accepts are acknowledged in it. With synchronous
// replication every acknowledged accept is on the new primary, those
// acknowledged during the stall included. With asynchronous replication the
// accepts acknowledged during the stall are lost, and only those: at least
// one, at most all of them, none acknowledged before. That loss is the
// boundary of asynchronous replication, not something pginbox can prevent.
// Either way no receipt's completion and business write come apart and
// nothing is applied twice.
func TestDrillFailover(t *testing.T) {
	requireFull(t)
	t.Run("sync", func(t *testing.T) { failoverDrill(t, true) })
	t.Run("async", func(t *testing.T) { failoverDrill(t, false) })
}

const standbyName = "drill_standby"

// stallFloor is how many accepts the failover drill has acknowledged after
// its fence, at least, before replication stalls (a sixth of a second of
// its load).
const stallFloor = 25

func failoverDrill(t *testing.T, sync bool) {
	const count, rate = 3000, 150.0
	primary := startCluster(t, nil)
	oldAdmin, _ := prepare(t, primary)
	// Replication goes through a TCP proxy, so the drill can stall it.
	proxy, err := faultproxy.New("unix", filepath.Join(primary.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", primary.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	standby, err := primary.StartStandby(t.Context(), standbyName, pgcluster.Options{Settings: drillSettings(map[string]string{
		"primary_conninfo": fmt.Sprintf("host=127.0.0.1 port=%d user=%s application_name=%s", proxy.Port(), pgcluster.Superuser, standbyName),
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := standby.Stop(); err != nil {
			t.Error(err)
		}
	})
	want := "async"
	if sync {
		// Only now: with a synchronous standby named, every commit waits
		// for it.
		want = "sync"
		if _, err := oldAdmin.Exec(t.Context(), "ALTER SYSTEM SET synchronous_standby_names = '"+standbyName+"'"); err != nil {
			t.Fatal(err)
		}
		if _, err := oldAdmin.Exec(t.Context(), "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		var state string
		err := oldAdmin.QueryRow(t.Context(), "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'", standbyName).Scan(&state)
		return err == nil && state == want
	}, "%s", "the standby to stream as "+want)
	// Both servers, whichever accepts writes: what a service configures.
	dsn, err := drillkit.AppDSN(fmt.Sprintf("host=%s,%s port=%d,%d sslmode=disable target_session_attrs=read-write",
		primary.SocketDir(), standby.SocketDir(), primary.Port(), standby.Port()))
	if err != nil {
		t.Fatal(err)
	}
	// Replication really runs through the proxy: the standby's WAL
	// receiver is connected to the proxy's port, and the proxy holds its
	// connection open. Otherwise the stall below stalls nothing.
	standbyAdmin := newPool(t, standby.ConnString("postgres"), "drill-admin", 2)
	var senderPort int
	err = standbyAdmin.QueryRow(t.Context(), "SELECT sender_port FROM pg_stat_wal_receiver WHERE status = 'streaming'").Scan(&senderPort)
	if err != nil || senderPort != int(proxy.Port()) || proxy.Open() < 1 {
		t.Fatalf("the standby streams from port %d (%v), the proxy listens on %d with %d open connections: replication bypasses the proxy",
			senderPort, err, proxy.Port(), proxy.Open())
	}
	a := startApp(t, dsn, appConfig{})
	load := a.load(t, count, rate)
	waitAcked(t, load, count/3)
	lag := replayLag(t, oldAdmin)

	// The fence: every accept acknowledged before it is on the standby
	// (its commit record is below the primary's WAL position read after
	// the fence, and the standby flushed that far) before the stall
	// starts. Only accepts acknowledged after the fence can miss it.
	fence := time.Now()
	var fenceLSN string
	if err := oldAdmin.QueryRow(t.Context(), "SELECT pg_current_wal_lsn()::text").Scan(&fenceLSN); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		var caught bool
		err := oldAdmin.QueryRow(t.Context(), "SELECT flush_lsn >= $1::pg_lsn FROM pg_stat_replication WHERE application_name = $2", fenceLSN, standbyName).Scan(&caught)
		return err == nil && caught
	}, "%s", "the standby to flush the WAL acknowledged before the stall")
	// The floor: some accepts are acknowledged after the fence before the
	// primary dies, or the checks of what was acknowledged during the stall
	// check nothing (some synchronous passes had none). A synchronous commit
	// is not acknowledged once the standby stops receiving, so they are
	// acknowledged now, before the blackhole: accepts that only the
	// synchronous standby vouches for, as the fence's flush does not cover
	// them.
	testkit.Eventually(t, 30*time.Second, func() bool {
		return ackedSince(load.Snapshot(), fence) >= stallFloor
	}, "%s", fmt.Sprintf("%d accepts acknowledged after the fence", stallFloor))

	// The standby stops receiving WAL shortly before the primary crashes,
	// as when the network between them fails first. Synchronous accepts
	// then wait, and fail when the primary crashes (not acknowledged);
	// asynchronous ones go on and are acknowledged without reaching the
	// standby.
	proxy.Blackhole()
	stall := checkStalled(t, oldAdmin, standbyAdmin, proxy, sync)
	ackedBeforeFence := ackedBefore(load.Snapshot(), fence)
	t0 := time.Now()
	if err := primary.Shutdown(pgcluster.ShutdownImmediate); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	admin := newPool(t, standby.ConnString(drillkit.Database), "drill-admin", 4)
	relisten := testkit.Eventually(t, 30*time.Second, func() bool { return listening(t, admin) }, "%s", "the worker to LISTEN on the new primary")
	recovery := firstAckAfter(t, load, promoted).Sub(t0)

	name := "failover-" + want
	// Acknowledged after the fence and before the promotion: by the old
	// primary during the stall, which lasts until that primary is dead
	// (Shutdown returned), not merely until the shutdown began. Nothing
	// accepts writes between its death and the promotion.
	duringStall := len(ackedBefore(load.Snapshot(), promoted)) - len(ackedBeforeFence)
	if duringStall < stallFloor {
		t.Errorf("drill %s: %d accepts acknowledged during the stall, want at least %d", "failover-"+want, duringStall, stallFloor)
	}
	more := []string{fmt.Sprintf("promote=%s listen_back_after=%s replay_lag_before_stall=%s acked_during_stall=%d %s leases_recovered=%d",
		promoted.Sub(t0).Round(time.Millisecond), relisten.Round(time.Millisecond), lag, duringStall, stall,
		a.logs.count("pginbox worker: recovered an expired lease"))}
	// Settle without the loss check, then count the loss against the
	// fence: lost=N on the line is every acknowledged accept the new
	// primary lacks.
	tally := settle(t, name, admin, load, recovery, more...)
	before, err := drillkit.Count(t.Context(), admin, ackedBeforeFence)
	if err != nil {
		t.Fatal(err)
	}
	if before.Missing != 0 {
		t.Errorf("drill %s: %d accepts acknowledged before the stall (and flushed by the standby) are missing on the new primary", name, before.Missing)
	}
	lost := tally.Missing
	if sync {
		// Synchronous replication: nothing acknowledged is lost, those
		// acknowledged during the stall included.
		if lost != 0 {
			t.Errorf("drill %s failed: %d acknowledged accepts are missing on the new primary (%d acknowledged during the stall)", name, lost, duringStall)
		}
	} else if lost == 0 || lost > duringStall {
		// Asynchronous replication loses what was acknowledged during
		// the stall, and only that: some of it, since the standby
		// received nothing then.
		t.Errorf("drill %s: %d acknowledged accepts lost, want between 1 and the %d acknowledged during the stall", name, lost, duringStall)
	}
	if out := load.Snapshot(); out.Uncertain+out.Retryable == 0 {
		t.Errorf("no accept met the failover: the drill proved nothing")
	}
}

// checkStalled lasts a second of the stall and fails the drill unless
// replication stalled at the proxy: the standby received no WAL for most of
// that second while the primary went on writing it (asynchronous) or had
// written more than the standby received and commits waited for the standby
// (synchronous), and the proxy holds data it did not forward. It returns the
// figures for the drill's line.
func checkStalled(t *testing.T, primary, standby drillkit.Querier, proxy *faultproxy.Proxy, sync bool) string {
	t.Helper()
	// What was on its way when the blackhole began has arrived by now.
	time.Sleep(300 * time.Millisecond)
	received0, written0 := receivedLSN(t, standby), writtenLSN(t, primary)
	time.Sleep(700 * time.Millisecond)
	received1, written1 := receivedLSN(t, standby), writtenLSN(t, primary)
	var waiting int
	if err := primary.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	held := proxy.Held()
	if received1 != received0 {
		t.Errorf("the standby received WAL during the stall (%d bytes): replication did not stall", received1-received0)
	}
	if held == 0 {
		t.Errorf("the proxy holds no replication data during the blackhole: replication did not stall")
	}
	if written1 <= received1 {
		t.Errorf("the standby received all of the primary's WAL during the stall: replication did not stall")
	}
	if !sync && written1 <= written0 {
		t.Errorf("the primary wrote no WAL during the stall: no accept went on without the standby")
	}
	if sync && waiting == 0 {
		t.Errorf("no commit waits for the synchronous standby during the stall")
	}
	return fmt.Sprintf("stall_held_reads=%d standby_behind_at_crash=%dB wal_written_in_stall=%dB commits_waiting_for_standby=%d",
		held, written1-received1, written1-written0, waiting)
}

// receivedLSN is the WAL position a standby received and flushed, in bytes.
func receivedLSN(t *testing.T, standby drillkit.Querier) int64 {
	t.Helper()
	var lsn int64
	if err := standby.QueryRow(t.Context(), "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), '0/0')::bigint").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// writtenLSN is the primary's current WAL write position, in bytes.
func writtenLSN(t *testing.T, primary drillkit.Querier) int64 {
	t.Helper()
	var lsn int64
	if err := primary.QueryRow(t.Context(), "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// ackedBefore is the message IDs acknowledged before t.
func ackedBefore(o drillkit.Outcome, t time.Time) []string {
	var ids []string
	for i, at := range o.AckedAt {
		if at.Before(t) {
			ids = append(ids, o.Acked[i])
		}
	}
	return ids
}

// ackedSince is how many accepts were acknowledged at or after t.
func ackedSince(o drillkit.Outcome, t time.Time) int {
	n := 0
	for _, at := range o.AckedAt {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// replayLag is how far the standby's replay was behind the primary's WAL
// just before the crash, in bytes.
func replayLag(t *testing.T, primary drillkit.Querier) string {
	t.Helper()
	var lag int64
	err := primary.QueryRow(context.Background(), `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)::bigint
		FROM pg_stat_replication WHERE application_name = $1`, standbyName).Scan(&lag)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%dB", lag)
}
