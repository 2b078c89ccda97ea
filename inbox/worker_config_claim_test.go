package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// With ClaimBatch left to its default, a worker's first claim on a deep
// backlog takes Concurrency x MessagesPerTx receipts in one statement.
func TestDefaultClaimFillsEveryHandlerSlot(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	msgs := make([]inbox.Message, 100)
	for i := range msgs {
		msgs[i] = orderMsg(fmt.Sprintf("evt-%03d", i), map[string]int{"n": i})
	}
	_, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)

	release := make(chan struct{})
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		<-release
		return nil
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 8, MessagesPerTx: 4})
	var mu sync.Mutex
	var claims []int
	inbox.SetTestHooks(w, func(n int) {
		mu.Lock()
		claims = append(claims, n)
		mu.Unlock()
	}, nil)
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(claims) > 0
	}, "a claim")
	mu.Lock()
	first := claims[0]
	mu.Unlock()
	close(release)
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == len(msgs) }, "every receipt COMPLETED")
	is.NoErr(w.Stop(ctx))
	is.Equal(first, 8*4) // the default ClaimBatch: Concurrency x MessagesPerTx
}
