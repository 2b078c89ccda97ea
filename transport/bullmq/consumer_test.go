package bullmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used
	defer rdb.Close()
	client := newClient(t, newPool(t))
	valid := func() bullmq.Config {
		return bullmq.Config{Redis: rdb, Queue: "q", Scope: inbox.Tenant(testTenant), Decode: decodeOrder}
	}
	cases := []struct {
		name   string
		change func(*bullmq.Config)
		want   string
	}{
		{"redis", func(c *bullmq.Config) { c.Redis = nil }, "Config.Redis: is nil"},
		{"scope", func(c *bullmq.Config) { c.Scope = inbox.Scope{} }, "Config.Scope: is unset"},
		{"queue", func(c *bullmq.Config) { c.Queue = "" }, "Config.Queue: is required"},
		{"decode", func(c *bullmq.Config) { c.Decode = nil }, "Config.Decode: is required"},
		{"delivery limit", func(c *bullmq.Config) { c.DeliveryLimit = -1 }, "Config.DeliveryLimit: is -1"},
		{"lock", func(c *bullmq.Config) { c.LockDuration = time.Millisecond }, "Config.LockDuration: is 1ms"},
		{"block", func(c *bullmq.Config) { c.Block = -time.Second }, "Config.Block: is -1s"},
		{"concurrency", func(c *bullmq.Config) { c.Concurrency = -1 }, "Config.Concurrency: is -1"},
	}
	for _, tc := range cases {
		cfg := valid()
		tc.change(&cfg)
		if _, err := bullmq.NewConsumer(client, cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want a config error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := bullmq.NewConsumer(nil, valid()); err == nil || !strings.Contains(err.Error(), "pass an *inbox.Client") {
		t.Errorf("nil accepter: err = %v", err)
	}
}

// Jobs added by BullMQ (standard, prioritized, delayed, with and without a
// custom ID) are accepted and then completed; BullMQ reports them
// completed with the outcome as return value. With IDField the identity
// comes from the job data, so two jobs of one event make one receipt.
func TestAcceptThenComplete(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	e := newEnv(t)
	ids := e.add(t,
		nodeJob{Name: "order", Data: map[string]any{"eventId": "evt-1", "orderId": "o-1"}},
		nodeJob{Name: "order", Data: map[string]any{"eventId": "evt-2", "orderId": "o-2"}, Opts: map[string]any{"jobId": "order-2"}},
		nodeJob{Name: "order", Data: map[string]any{"eventId": "evt-3"}, Opts: map[string]any{"priority": 5}},
		nodeJob{Name: "order", Data: map[string]any{"eventId": "evt-4"}, Opts: map[string]any{"delay": 300}},
		nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1", "eventId": "evt-1"}}, // the producer sent evt-1 again
	)
	cfg := e.config(testlog.Errors(t))
	cfg.IDField = "eventId"
	start(t, newClient(t, pool), cfg)

	drill.Eventually(t, 30*time.Second, "every job completed", func() bool {
		for _, s := range e.states(t, ids...) {
			if s.State != "completed" {
				return false
			}
		}
		return true
	})
	states := e.states(t, ids...)
	outcomes := map[string]int{}
	for _, id := range ids {
		var rv struct{ Outcome, Receipt string }
		if err := json.Unmarshal(states[id].ReturnValue, &rv); err != nil || rv.Receipt == "" {
			t.Fatalf("job %s: return value %s: %v", id, states[id].ReturnValue, err)
		}
		outcomes[rv.Outcome]++
	}
	if outcomes[string(inbox.Accepted)] != 4 || outcomes[string(inbox.Duplicate)] != 1 {
		t.Fatalf("outcomes %v, want 4 accepted and 1 duplicate", outcomes)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live WHERE scope_id = $1`, testTenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("%d receipts of %s, want 4", n, testTenant)
	}
}

// Jobs that can never be accepted are failed in BullMQ with the reason;
// nothing reaches the inbox.
func TestRejectToFailed(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	e := newEnv(t)
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	var nested any
	if err := json.Unmarshal([]byte(deep), &nested); err != nil {
		t.Fatal(err)
	}
	ids := e.add(t,
		nodeJob{Name: "undecodable", Data: map[string]any{"eventId": "evt-1"}},
		nodeJob{Name: "order", Data: map[string]any{"orderId": "o-2"}},
		nodeJob{Name: "order", Data: map[string]any{"eventId": "evt-3", "deep": nested}},
	)
	want := map[string]string{
		ids[0]: "pginbox decode: undecodable job",
		ids[1]: `pginbox decode: no message ID: the job data has no string field "eventId"`,
		ids[2]: "pginbox invalid: ",
	}
	cfg := e.config(testlog.Errors(t))
	cfg.IDField = "eventId"
	start(t, newClient(t, pool), cfg)
	drill.Eventually(t, 30*time.Second, "three failed jobs", func() bool {
		for _, s := range e.states(t, ids...) {
			if s.State != "failed" {
				return false
			}
		}
		return true
	})
	for id, s := range e.states(t, ids...) {
		if !strings.HasPrefix(s.FailedReason, want[id]) {
			t.Errorf("job %s: failedReason %q, want it to start with %q", id, s.FailedReason, want[id])
		}
	}
	reason, err := e.rdb.HGet(context.Background(), bullmq.DefaultPrefix+":"+e.queue+":"+ids[2], bullmq.FieldReason).Result()
	if err != nil || reason != bullmq.ReasonInvalid {
		t.Fatalf("job %s: %s = %q, %v", ids[2], bullmq.FieldReason, reason, err)
	}
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}

// flaky fails accepts as a lost database would: the first call commits and
// then loses the reply (an uncertain commit), the second fails outright;
// then it passes accepts through.
type flaky struct {
	inner bullmq.Accepter
	calls atomic.Int64
}

var errOutage = errors.New("database unreachable")

func (f *flaky) Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
	switch f.calls.Add(1) {
	case 1:
		if _, err := f.inner.Accept(ctx, msg); err != nil {
			return inbox.AcceptResult{}, err
		}
		return inbox.AcceptResult{}, errOutage
	case 2:
		return inbox.AcceptResult{}, errOutage
	}
	return f.inner.Accept(ctx, msg)
}

// A failed accept leaves the job active; after its lock expires it goes
// back to wait and is taken again, and the accept that committed before the
// failure makes the last one a Duplicate: one receipt, job completed on the
// third attempt.
func TestDatabaseOutageRetriesAfterLock(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	e := newEnv(t)
	ids := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1"}, Opts: map[string]any{"jobId": "evt-outage"}})
	acc := &flaky{inner: newClient(t, pool)}
	log, logs := testlog.Capture()
	start(t, acc, e.config(log))
	drill.Eventually(t, 30*time.Second, "the job completed", func() bool { return e.states(t, ids...)[ids[0]].State == "completed" })
	s := e.states(t, ids...)[ids[0]]
	var rv struct{ Outcome string }
	_ = json.Unmarshal(s.ReturnValue, &rv)
	if s.AttemptsStarted < 3 || rv.Outcome != string(inbox.Duplicate) {
		t.Fatalf("job %+v: want at least 3 attempts started and a duplicate outcome", s)
	}
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
	if !strings.Contains(logs.String(), "moved back to wait") {
		t.Fatalf("the stalled job's move was not logged:\n%s", logs)
	}
}

// A job whose accepts keep failing is failed after DeliveryLimit takes,
// with the last error.
func TestDeliveryLimitFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1"}})
	cfg := e.config(testlog.Errors(t))
	cfg.DeliveryLimit = 2
	start(t, down{}, cfg)
	drill.Eventually(t, 30*time.Second, "the job failed", func() bool { return e.states(t, ids...)[ids[0]].State == "failed" })
	s := e.states(t, ids...)[ids[0]]
	if !strings.HasPrefix(s.FailedReason, "pginbox delivery_limit: not accepted after 2 deliveries") || !strings.Contains(s.FailedReason, errOutage.Error()) || s.AttemptsStarted != 3 {
		t.Fatalf("job %+v", s)
	}
}

// down is a database that never answers.
type down struct{}

func (down) Accept(context.Context, inbox.Message) (inbox.AcceptResult, error) {
	return inbox.AcceptResult{}, errOutage
}

// Run returns nil after cancel, and a stopped consumer takes nothing.
func TestRunStops(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	e := newEnv(t)
	stop := start(t, newClient(t, pool), e.config(testlog.Errors(t)))
	first := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1"}})
	drill.Eventually(t, 30*time.Second, "the job completed", func() bool { return e.states(t, first...)[first[0]].State == "completed" })
	stop()
	second := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-2"}})
	// Nothing runs that could take it, so no event can say it was not
	// taken: watch for a while.
	var s jobState
	testkit.Never(t, 300*time.Millisecond, func() bool { s = e.states(t, second...)[second[0]]; return s.State != "waiting" },
		"after stop: job %v, want waiting", testkit.Lazy(func() string { return fmt.Sprintf("%+v", s) }))
}

// slow accepts, then returns at the accept's deadline.
type slow struct{ inner bullmq.Accepter }

func (s slow) Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
	res, err := s.inner.Accept(ctx, msg)
	if _, ok := ctx.Deadline(); ok {
		<-ctx.Done()
	}
	return res, err
}

// An accept that uses all its time still leaves the completion time of its
// own: the job completes on its first attempt.
func TestSlowAcceptStillCompletes(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	e := newEnv(t)
	ids := e.add(t, nodeJob{Name: "order", Data: map[string]any{"orderId": "o-1"}})
	cfg := e.config(testlog.Errors(t))
	_ = cfg.Redis.Close()
	// A client that applies context deadlines to its calls, as go-redis
	// does with ContextTimeoutEnabled.
	cfg.Redis = redis.NewClient(&redis.Options{Addr: e.addr, ContextTimeoutEnabled: true})
	start(t, slow{newClient(t, pool)}, cfg)
	drill.Eventually(t, 30*time.Second, "the job completed", func() bool { return e.states(t, ids...)[ids[0]].State == "completed" })
	s := e.states(t, ids...)[ids[0]]
	var rv struct{ Outcome string }
	_ = json.Unmarshal(s.ReturnValue, &rv)
	if s.AttemptsStarted != 1 || rv.Outcome != string(inbox.Accepted) {
		t.Fatalf("job %+v: want completed as accepted on the first attempt", s)
	}
}
