package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

func TestLoadManyWorkersWithRetriesAndRedeliveries(t *testing.T) {
	t.Parallel()
	const (
		workers     = 4
		concurrency = 4
		senders     = 8
		messages    = 2000
	)
	ctx := context.Background()
	pool, dsn := newPool(t, func(c *pgxpool.Config) { c.MaxConns = senders + 4 })
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// 20% fail their first 1-3 attempts; 5% are delivered twice.
	failFor := map[string]int{}
	redeliver := map[int]bool{}
	wantFailures := 0
	for i := range messages {
		if rng.Float64() < 0.20 {
			failFor[msgID(i)] = 1 + rng.IntN(3)
			wantFailures += failFor[msgID(i)]
		}
	}
	for _, i := range rng.Perm(messages)[:messages/20] {
		redeliver[i] = true
	}

	var failures atomic.Int64
	handled := make([]atomic.Int64, workers)
	quiet := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	for n := range workers {
		fn := func(ctx context.Context, m *handler.Msg) error {
			if m.Attempt <= failFor[m.MessageID] {
				failures.Add(1)
				return fmt.Errorf("transient failure %d of %s", m.Attempt, m.MessageID)
			}
			handled[n].Add(1)
			return writeEffect(ctx, m, fmt.Sprint(n))
		}
		p := poolFor(t, dsn, func(c *pgxpool.Config) { c.MaxConns = concurrency + 4 })
		startWorker(t, newWorker(t, p, registry(t, fn), inbox.WorkerConfig{
			Concurrency:  concurrency,
			PollInterval: 50 * time.Millisecond,
			Backoff:      func(int) time.Duration { return 10 * time.Millisecond },
			Logger:       quiet,
		}))
	}

	// Accept while the workers run; redeliveries follow their original at once,
	// so they meet receipts in every state.
	start := time.Now()
	accepted := make(chan int, messages)
	var wg sync.WaitGroup
	var duplicates atomic.Int64
	errs := make(chan error, senders+1)
	for s := range senders {
		wg.Go(func() {
			for i := s; i < messages; i += senders {
				if _, err := c.Accept(ctx, loadMsg(i)); err != nil {
					errs <- err
					return
				}
				accepted <- i
			}
		})
	}
	redelivered := make(chan struct{})
	go func() {
		defer close(redelivered)
		for range messages {
			i := <-accepted
			if !redeliver[i] {
				continue
			}
			res, err := c.Accept(ctx, loadMsg(i))
			if err != nil {
				errs <- err
				return
			}
			if res.Outcome == inbox.Duplicate {
				duplicates.Add(1)
			}
		}
	}()
	wg.Wait()
	select {
	case <-redelivered:
	case err := <-errs:
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("accepted %d messages and %d redeliveries in %v", messages, duplicates.Load(), time.Since(start).Round(time.Millisecond))

	testkit.Eventually(t, 2*time.Minute, func() bool { return countRows(t, pool, "status = 'COMPLETED'") >= messages },
		"all %d COMPLETED; saw %v", messages, testkit.Lazy(func() string { return statusSummary(t, pool) }))
	perWorker := make([]int64, workers)
	for n := range handled {
		perWorker[n] = handled[n].Load()
	}
	t.Logf("all %d completed %v after the first Accept; handled per worker: %v", messages, time.Since(start).Round(time.Millisecond), perWorker)

	if got := duplicates.Load(); got != int64(len(redeliver)) {
		t.Errorf("%d redeliveries reported Duplicate, want %d", got, len(redeliver))
	}
	requireOneEffectPerReceipt(t, pool, messages)
	// Each failing message failed as often as planned; more only if a lease
	// was lost, which the guarantee allows.
	if got := failures.Load(); got < int64(wantFailures) {
		t.Errorf("%d handler failures, want at least %d", got, wantFailures)
	}
	if n := countRows(t, pool, "last_error IS NOT NULL"); n != 0 {
		t.Errorf("%d completed receipts kept an error", n)
	}
}

func msgID(i int) string { return fmt.Sprintf("m-%05d", i) }

func loadMsg(i int) inbox.Message {
	return orderMsg(msgID(i), map[string]any{"orderId": msgID(i), "n": i})
}
