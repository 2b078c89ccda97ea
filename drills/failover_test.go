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
)

// TestDrillFailover crashes a primary under load and promotes its streaming
// standby; the application reconnects through a two-host DSN with
// target_session_attrs=read-write.
//
// With synchronous replication every acknowledged accept is on the new
// primary. With asynchronous replication the acknowledged accepts missing
// there are measured and reported: that loss is the boundary of
// asynchronous replication, not something pginbox can prevent. Either way
// no receipt's completion and business write come apart and nothing is
// applied twice.
func TestDrillFailover(t *testing.T) {
	requireFull(t)
	t.Run("sync", func(t *testing.T) { failoverDrill(t, true) })
	t.Run("async", func(t *testing.T) { failoverDrill(t, false) })
}

const standbyName = "drill_standby"

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
	eventually(t, 30*time.Second, "the standby to stream as "+want, func() bool {
		var state string
		err := oldAdmin.QueryRow(t.Context(), "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'", standbyName).Scan(&state)
		return err == nil && state == want
	})
	// Both servers, whichever accepts writes: what a service configures.
	dsn, err := drillkit.AppDSN(fmt.Sprintf("host=%s,%s port=%d,%d sslmode=disable target_session_attrs=read-write",
		primary.SocketDir(), standby.SocketDir(), primary.Port(), standby.Port()))
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, dsn, appConfig{})
	load := a.load(t, count, rate)
	waitAcked(t, load, count/3)
	lag := replayLag(t, oldAdmin)

	// The standby stops receiving WAL shortly before the primary crashes,
	// as when the network between them fails first. Synchronous accepts
	// then wait (and time out: not acknowledged); asynchronous ones go on
	// and are acknowledged without reaching the standby.
	stalled := time.Now()
	proxy.Blackhole()
	time.Sleep(time.Second)
	ackedBeforeStall := ackedBefore(load.Snapshot(), stalled)
	t0 := time.Now()
	if err := primary.Shutdown(pgcluster.ShutdownImmediate); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	admin := newPool(t, standby.ConnString(drillkit.Database), "drill-admin", 4)
	relisten := eventually(t, 30*time.Second, "the worker to LISTEN on the new primary", func() bool { return listening(t, admin) })
	recovery := firstAckAfter(t, load, promoted).Sub(t0)

	name := "failover-" + want
	stallAcks := len(ackedBefore(load.Snapshot(), t0)) - len(ackedBeforeStall)
	more := []string{fmt.Sprintf("promote=%s listen_back_after=%s replay_lag_before_stall=%s acked_during_1s_stall=%d leases_recovered=%d",
		promoted.Sub(t0).Round(time.Millisecond), relisten.Round(time.Millisecond), lag, stallAcks,
		a.logs.count("pginbox worker: recovered an expired lease"))}
	if sync {
		finish(t, name, admin, load, recovery, more...)
		return
	}
	// lost=N is what asynchronous replication loses: the acknowledged
	// accepts the new primary lacks, acknowledged during the stall or just
	// before it (within the replication lag).
	before, err := drillkit.Count(t.Context(), admin, ackedBeforeStall)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, name, admin, load, recovery, append(more, fmt.Sprintf("lost_acked_before_stall=%d", before.Missing))...)
	if out := load.Snapshot(); out.Uncertain+out.Retryable == 0 {
		t.Errorf("no accept met the failover: the drill proved nothing")
	}
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
