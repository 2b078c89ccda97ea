package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
)

// A burst of accepts sends far fewer NOTIFYs than receipts, and a wake-up still
// follows the last commit, so a listening worker never misses the tail.
func TestAcceptCoalescesWakeups(t *testing.T) {
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
