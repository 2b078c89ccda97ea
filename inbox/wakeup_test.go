package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A burst of accepts sends far fewer NOTIFYs than receipts, and a wake-up still
// follows the last commit, so a listening worker never misses the tail.
func TestAcceptCoalescesWakeups(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	listener, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	is.NoErr(err)

	const burst = 100
	for i := range burst {
		_, err := c.Accept(ctx, orderMsg(fmt.Sprint("evt-", i), map[string]int{"n": i}))
		is.NoErr(err)
	}
	lastCommit := time.Now()

	var got int
	var last time.Time
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break // quiet for 500ms: the burst's wake-ups are all in
		}
		is.Equal(n.Payload, "orders.projection.v1")
		got++
		last = time.Now()
	}
	t.Logf("%d accepts, %d notifications", burst, got)
	if got == 0 || got >= burst {
		t.Fatalf("%d notifications for %d accepts: want at least one and far fewer than one each", got, burst)
	}
	if !last.After(lastCommit) {
		t.Fatal("no wake-up arrived after the last accept committed")
	}
}

// Close sends the wake-ups the client still owes while the pool is open, so
// closing the pool right after it logs nothing; later accepts are refused.
func TestClientCloseFlushesWakeups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dsn := newPool(t)
	logger, rec := newLogRecorder(t)
	c, err := inbox.NewClient(pool, inbox.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+inbox.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	// The second accept of a window owes a wake-up sent after the window.
	for i := range 5 {
		if _, err := c.Accept(ctx, orderMsg(fmt.Sprint("evt-", i), map[string]int{"n": i})); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	pool.Close()
	// A wake-up still owed would go out on the coalescing window's timer
	// (25ms), an event the client does not expose: watch past it.
	testkit.Never(t, 100*time.Millisecond, func() bool { return rec.logged("waking workers failed") },
		"a wake-up was sent after Close, on the closed pool")
	got := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		got++
	}
	if got < 2 {
		t.Fatalf("%d notifications: want the inline one and the one Close sent", got)
	}
	if _, err := c.Accept(ctx, orderMsg("late", map[string]int{"n": 1})); !errors.Is(err, inbox.ErrClientClosed) {
		t.Fatalf("Accept after Close: %v, want ErrClientClosed", err)
	}
}
