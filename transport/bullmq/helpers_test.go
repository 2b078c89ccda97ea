package bullmq_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// Identity parts of every test message; the event type is the drill
// ledger's.
const (
	testTenant   = "tenant-a"
	testSource   = "bullmq-test"
	testConsumer = "orders.projection.v1"
)

// redisAddr is the shared Redis (skips or fails when it is missing).
func redisAddr(t testing.TB) string { return brokertest.Require(t, brokertest.Redis) }

func newRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// fixtureDir holds the Node fixture driving the real BullMQ.
var fixtureDir, _ = filepath.Abs(filepath.Join("testdata", "node"))

var npmOnce struct {
	sync.Once
	missingNPM bool
	err        error
}

// requireNode skips the test (fails it with CI=true) when node or npm is
// missing, and installs the fixture's packages from its lockfile once.
func requireNode(t testing.TB) {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bullmq: %s is missing; CI must provide Node.js 20 and npm", what)
		}
		t.Skipf("bullmq: skipping: %s not found (the tests drive the real BullMQ through Node.js; install nodejs and npm)", what)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node")
	}
	// Every test waits for the one install: a node_modules/bullmq that
	// exists may be one npm is still writing.
	npmOnce.Do(func() {
		check := exec.Command("node", "-e", "require('bullmq')")
		check.Dir = fixtureDir
		if check.Run() == nil {
			return // installed by an earlier run
		}
		if _, err := exec.LookPath("npm"); err != nil {
			npmOnce.missingNPM = true
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = fixtureDir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmOnce.err = errors.New(string(out))
		}
	})
	if npmOnce.missingNPM {
		missing("npm")
	}
	if npmOnce.err != nil {
		t.Fatalf("bullmq: npm ci in %s: %v", fixtureDir, npmOnce.err)
	}
}

// node runs the fixture and decodes its output into out.
func node(t testing.TB, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"fixture.js"}, args...)...)
	cmd.Dir = fixtureDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node fixture.js %v: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("node fixture.js %v: output %q: %v", args, stdout, err)
	}
}

// env is one test's queue on the shared Redis.
type env struct {
	addr  string
	rdb   *redis.Client
	queue string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	addr := redisAddr(t)
	requireNode(t)
	e := &env{addr: addr, rdb: newRedis(t, addr), queue: "pgi-" + randomID()}
	t.Cleanup(func() { e.cleanup() })
	return e
}

// cleanup deletes the queue's keys.
func (e *env) cleanup() {
	ctx := context.Background()
	iter := e.rdb.Scan(ctx, 0, bullmq.DefaultPrefix+":"+e.queue+":*", 100).Iterator()
	for iter.Next(ctx) {
		_ = e.rdb.Del(ctx, iter.Val()).Err()
	}
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nodeJob is a job for the fixture's add.
type nodeJob struct {
	Name string         `json:"name"`
	Data any            `json:"data"`
	Opts map[string]any `json:"opts,omitempty"`
}

// add adds jobs with BullMQ's Queue.add and returns their IDs.
func (e *env) add(t testing.TB, jobs ...nodeJob) []string {
	t.Helper()
	b, _ := json.Marshal(jobs)
	var ids []string
	node(t, &ids, "add", "redis://"+e.addr, e.queue, string(b))
	return ids
}

// jobState is a job as BullMQ's Node API reports it.
type jobState struct {
	ID              string          `json:"id"`
	State           string          `json:"state"`
	FailedReason    string          `json:"failedReason"`
	ReturnValue     json.RawMessage `json:"returnvalue"`
	AttemptsStarted int             `json:"attemptsStarted"`
}

// states asks BullMQ for the jobs' states.
func (e *env) states(t testing.TB, ids ...string) map[string]jobState {
	t.Helper()
	var got []jobState
	node(t, &got, append([]string{"state", "redis://" + e.addr, e.queue}, ids...)...)
	m := make(map[string]jobState, len(got))
	for _, s := range got {
		m[s.ID] = s
	}
	return m
}

// config is a Consumer configuration for e with short delays.
func (e *env) config(log *slog.Logger) bullmq.Config {
	return bullmq.Config{
		Redis:        newRedisNoCleanup(e.addr),
		Queue:        e.queue,
		Scope:        inbox.Tenant(testTenant),
		Decode:       decodeOrder,
		Worker:       "test-" + randomID(),
		LockDuration: 2 * time.Second,
		Block:        100 * time.Millisecond,
		Logger:       log,
	}
}

func newRedisNoCleanup(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second})
}

// decodeOrder maps a test job: the payload is the job's data.
func decodeOrder(j bullmq.Job) (inbox.Message, error) {
	if j.Name == "undecodable" {
		return inbox.Message{}, errors.New("undecodable job")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: testSource, Consumer: testConsumer},
		EventType:     drill.EventType,
		SchemaVersion: drill.SchemaVersion,
		Payload:       json.RawMessage(j.Data),
	}, nil
}

// start creates a Consumer for cfg and runs it until the test ends (or stop
// is called); Run must return nil.
func start(t testing.TB, acc bullmq.Accepter, cfg bullmq.Config) (stop func()) {
	t.Helper()
	c, err := bullmq.NewConsumer(acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cfg.Redis.Close() })
	return drill.Run(t, c.Run)
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
