package bullmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// Environment of the crashing child process.
const (
	crashChildEnv = "BULLMQ_CRASH_CHILD"
	crashQueueEnv = "BULLMQ_CRASH_QUEUE"
	crashDSNEnv   = "BULLMQ_CRASH_DSN"
	crashExit     = 3
)

// exitAfterAccept commits the accept, then ends the process before the
// consumer can complete the job.
type exitAfterAccept struct{ inner bullmq.Accepter }

func (x exitAfterAccept) Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
	res, err := x.inner.Accept(ctx, msg)
	if err == nil {
		os.Exit(crashExit)
	}
	return res, err
}

// A consumer process that dies between the accept's commit and the
// completion leaves the job active under its lock. When the lock expires a
// new consumer takes the job again; the accept is a Duplicate, the job is
// completed, and the inbox holds one receipt.
func TestCrashBetweenAcceptAndComplete(t *testing.T) {
	if os.Getenv(crashChildEnv) == "1" {
		crashChild(t)
		return
	}
	t.Parallel()
	e := newEnv(t)
	dsn := testDSN(t)
	pool := drill.Pool(t, dsn, nil)
	ids := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1"}, Opts: map[string]any{"jobId": "evt-crash"}})

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashBetweenAcceptAndComplete$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashQueueEnv+"="+e.queue, crashDSNEnv+"="+dsn)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != crashExit {
		t.Fatalf("child: %v, want exit %d\n%s", err, crashExit, out)
	}
	if s := e.states(t, ids...)[ids[0]]; s.State != "active" {
		t.Fatalf("after the crash: %+v, want active", s)
	}
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts after the crash, want 1", n)
	}

	start(t, newClient(t, pool), e.config(testlog.Errors(t)))
	drill.Eventually(t, 30*time.Second, "the job completed", func() bool { return e.states(t, ids...)[ids[0]].State == "completed" })
	s := e.states(t, ids...)[ids[0]]
	var rv struct{ Outcome string }
	_ = json.Unmarshal(s.ReturnValue, &rv)
	if rv.Outcome != string(inbox.Duplicate) || s.AttemptsStarted != 2 {
		t.Fatalf("job %+v: want a duplicate outcome on the second attempt", s)
	}
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}

// crashChild runs a consumer that exits inside its first accept.
func crashChild(t *testing.T) {
	e := &env{addr: redisAddr(t), queue: os.Getenv(crashQueueEnv)}
	cfg := e.config(testlog.Errors(t))
	cfg.LockDuration = 2 * time.Second
	pool := drill.Pool(t, os.Getenv(crashDSNEnv), nil)
	c, err := bullmq.NewConsumer(exitAfterAccept{newClient(t, pool)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.Run(ctx)
	t.Fatal("the child's consumer returned without taking the job")
}

// A BullMQ Worker in Node that dies inside a job leaves it active under its
// lock; when the lock expires the Consumer's stalled check moves it back to
// wait and the Consumer accepts and completes it.
func TestTakesJobsOfCrashedNodeWorker(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	e := newEnv(t)
	ids := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1"}})
	cmd := exec.Command("node", "fixture.js", "crash", "redis://"+e.addr, e.queue)
	cmd.Dir = fixtureDir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("node crash: %v, want exit 7\n%s", err, out)
	}
	if s := e.states(t, ids...)[ids[0]]; s.State != "active" || s.AttemptsStarted != 1 {
		t.Fatalf("after the Node worker crashed: %+v, want active after one attempt", s)
	}
	log, logs := testlog.Capture()
	start(t, newClient(t, pool), e.config(log))
	drill.Eventually(t, 30*time.Second, "the job completed", func() bool { return e.states(t, ids...)[ids[0]].State == "completed" })
	if s := e.states(t, ids...)[ids[0]]; s.AttemptsStarted != 2 {
		t.Fatalf("job %+v: want completed on the second attempt\n%s", s, logs)
	}
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}
