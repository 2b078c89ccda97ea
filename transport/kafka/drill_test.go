package kafka_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

// PostgreSQL is unreachable for a while: no offset passes an unaccepted
// record, the consumer re-reads, and once the database is back every record
// is applied exactly once.
func TestDrillDatabaseOutage(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	dsn := testDSN(t)
	proxy, pool := drill.ProxiedPool(t, dsn)
	direct := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, direct, testConsumer)
	const n = 200
	sent := r.produceAll(t, "outage", n, 2)
	cfg := r.config(t)
	cfg.MaxBatch = 10
	c, err := kafka.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	stop := run(t, c)

	drill.Eventually(t, 30*time.Second, "50 receipts", func() bool { return ledger.Receipts(t) >= 50 })
	drill.Down(t, proxy)
	drill.Eventually(t, 30*time.Second, "5 rewinds", func() bool { return c.Stats().Rewinds >= 5 })
	r.checkNoCommitPastUnaccepted(t, direct, nil)
	stored := ledger.Receipts(t)
	proxy.Resume()
	drill.Eventually(t, 60*time.Second, "every offset committed", func() bool { return r.committedAll(t) })
	stop()
	r.checkNoCommitPastUnaccepted(t, direct, nil)
	if stored == n {
		t.Fatalf("the outage hit nothing: all %d stored before recovery", n)
	}
	t.Logf("outage: %d stored before recovery, %d rewinds", stored, c.Stats().Rewinds)
	ledger.Report(t, "kafka database-outage", sent, c.Stats().Acked)
}

// A second member joins while the first cannot store anything, then the
// first leaves: its revoke commits only what it accepted, so the records it
// could not store are read again by the new owner, none skipped.
func TestDrillRebalanceDuringOutage(t *testing.T) {
	t.Parallel()
	r := newRig(t, 4)
	dsn := testDSN(t)
	proxy, poolA := drill.ProxiedPool(t, dsn)
	direct := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, direct, testConsumer)
	const n = 400
	sent := r.produceAll(t, "rebalance", n, 4)

	cfgA := r.config(t)
	cfgA.MaxBatch = 8
	a, err := kafka.NewConsumer(newClient(t, poolA), cfgA)
	must(t, err)
	stopA := run(t, a)
	drill.Eventually(t, 30*time.Second, "A stored 60", func() bool { return ledger.Receipts(t) >= 60 })
	drill.Down(t, proxy)
	drill.Eventually(t, 30*time.Second, "A rewinding", func() bool { return a.Stats().Rewinds >= 2 })

	b, err := kafka.NewConsumer(newClient(t, direct), r.config(t))
	must(t, err)
	stopB := run(t, b)
	drill.Eventually(t, 60*time.Second, "B acking after the rebalance", func() bool { return b.Stats().Acked > 0 })
	r.checkNoCommitPastUnaccepted(t, direct, nil)
	stopA() // leaves: a second revoke, then B owns every partition
	r.checkNoCommitPastUnaccepted(t, direct, nil)
	drill.Eventually(t, 60*time.Second, "every offset committed", func() bool { return r.committedAll(t) })
	stopB()
	r.checkNoCommitPastUnaccepted(t, direct, nil)
	t.Logf("rebalance: A acked %d with %d rewinds, B acked %d", a.Stats().Acked, a.Stats().Rewinds, b.Stats().Acked)
	ledger.Report(t, "kafka rebalance-during-outage", sent, a.Stats().Acked+b.Stats().Acked)
}

// Environment of the child consumer in TestDrillKillBetweenAcceptAndCommit.
const (
	envChild   = "PGINBOX_KAFKA_DRILL_CHILD"
	envBrokers = "PGINBOX_KAFKA_DRILL_BROKERS"
	envDSN     = "PGINBOX_KAFKA_DRILL_DSN"
)

// haltAfterAccept lets the first batch commit in the database, reports it on
// stdout and then hangs before the consumer can commit the offsets, waiting
// for the parent's SIGKILL.
type haltAfterAccept struct{ kafka.Accepter }

func (h haltAfterAccept) AcceptBatch(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error) {
	items, err := h.Accepter.AcceptBatch(ctx, msgs)
	if err != nil {
		return items, err
	}
	fmt.Printf("ACCEPTED %d\n", len(msgs))
	os.Stdout.Sync()
	select {}
}

// A real consumer process is killed with SIGKILL after AcceptBatch committed
// and before the offsets were committed. The restarted consumer re-reads
// those records: every one is a Duplicate, and each is applied once.
func TestDrillKillBetweenAcceptAndCommit(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		killDrillChild(t)
		return
	}
	t.Parallel()
	r := newRig(t, 1, kfake.GroupMinSessionTimeout(time.Second))
	dsn := testDSN(t)
	pool := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, pool, testConsumer)
	const n = 50
	sent := r.produceAll(t, "kill", n, 1)

	cmd := exec.Command(os.Args[0], "-test.run=^TestDrillKillBetweenAcceptAndCommit$", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"=1", envBrokers+"="+strings.Join(r.addrs, ","), envDSN+"="+dsn)
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var accepted int
	timeout := time.After(60 * time.Second)
	for accepted == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the child exited before accepting a batch")
			}
			fmt.Sscanf(l, "ACCEPTED %d", &accepted)
		case <-timeout:
			t.Fatal("the child accepted nothing within 60s")
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	if got := r.committed(t)[0]; got > 0 {
		t.Fatalf("offset %d committed by a consumer killed before its commit", got)
	}
	if got := ledger.Receipts(t); got != accepted {
		t.Fatalf("%d receipts after the kill, want the %d the child accepted", got, accepted)
	}

	acc := &outcomes{Accepter: newClient(t, pool)}
	c, err := kafka.NewConsumer(acc, r.config(t))
	must(t, err)
	stop := run(t, c)
	drill.Eventually(t, 60*time.Second, "every offset committed after the restart", func() bool { return r.committedAll(t) })
	stop()
	if acc.get(inbox.Duplicate) != accepted || acc.get(inbox.Accepted) != n-accepted {
		t.Fatalf("restart outcomes %v, want %d duplicates (the killed batch) and %d accepted", acc.counts, accepted, n-accepted)
	}
	t.Logf("kill: child accepted %d and was killed before committing; the restart saw %d duplicates", accepted, acc.get(inbox.Duplicate))
	ledger.Report(t, "kafka kill-between-accept-and-commit", sent, c.Stats().Acked)
}

// killDrillChild is the consumer process the drill kills.
func killDrillChild(t *testing.T) {
	pool := drill.Pool(t, os.Getenv(envDSN), nil)
	cfg := kafka.Config{
		Brokers:         strings.Split(os.Getenv(envBrokers), ","),
		Topics:          []string{topic},
		Group:           group,
		Scope:           inbox.Tenant("tenant-a"),
		Decode:          decode,
		DeadLetterTopic: deadTopic,
		MaxBatch:        20,
		// A short session, so the restarted member does not wait long for
		// the group to drop the dead one.
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(200 * time.Millisecond)},
	}
	c, err := kafka.NewConsumer(haltAfterAccept{newClient(t, pool)}, cfg)
	must(t, err)
	_ = c.Run(context.Background()) // never returns: killed inside AcceptBatch
}
