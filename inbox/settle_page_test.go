package inbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// Receipts accepted together share a page and settle together, in handler
// transactions still open while their neighbours settle. Each settling
// update must still fit on the receipt's own page (a HOT update, no index
// entry): the table leaves room for every receipt on a page to settle once
// before any earlier version can be pruned. At fillfactor 85, 10 of these 16
// went to another page.
func TestConcurrentSettlingStaysOnTheReceiptsPage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	client := newClient(t, pool, inbox.Config{})

	const n = 16
	msgs := make([]inbox.Message, n)
	for i := range msgs {
		msgs[i] = orderMsg(fmt.Sprint("evt-", i), map[string]string{"orderId": "o-1", "note": strings.Repeat("a receipt of a realistic size, most of it payload; ", 5)})
	}
	_, err := client.AcceptBatch(ctx, msgs)
	is.NoErr(err)
	pages := func() map[string]string {
		rows, err := pool.Query(ctx, `SELECT id::text, (ctid::text::point)[0]::text FROM pginbox_receipts`)
		is.NoErr(err)
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var id, page string
			is.NoErr(rows.Scan(&id, &page))
			m[id] = page
		}
		is.NoErr(rows.Err())
		return m
	}
	before := pages()
	is.Equal(len(before), n)

	// Every handler waits until all n are running: n transactions have
	// settled their receipt and none has committed.
	var mu sync.Mutex
	running := 0
	all := make(chan struct{})
	w := newWorker(t, poolFor(t, dsn), registry(t, func(ctx context.Context, _ *handler.Msg) error {
		mu.Lock()
		running++
		if running == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
		return nil
	}), inbox.WorkerConfig{Concurrency: n, MessagesPerTx: 1, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(ctx) })
	testkit.Eventually(t, 30*time.Second, func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == n
	}, "every receipt COMPLETED")
	select {
	case <-all:
	default:
		t.Fatalf("the %d handlers never ran at once", n)
	}

	moved := 0
	for id, page := range pages() {
		if page != before[id] {
			moved++
		}
	}
	if moved > 0 {
		t.Fatalf("%d of %d receipts settled on another page than their own (no room left on it): an index entry each instead of a HOT update", moved, n)
	}
}
