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
)

// Drain runs up to Concurrency handlers at once, as its doc says: here the
// first three handlers wait until all three run, which never happens if
// Drain runs them one after another, and no fourth joins them.
func TestDrainRunsUpToConcurrencyHandlersAtOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	var msgs []inbox.Message
	for i := range 5 {
		msgs = append(msgs, orderMsg(fmt.Sprintf("evt-%d", i), raw(`{"orderId":"o-1"}`)))
	}
	acceptAll(t, newClient(t, pool, inbox.Config{}), msgs...)

	var mu sync.Mutex
	running, most, started := 0, 0, 0
	all3 := make(chan struct{})
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		mu.Lock()
		running++
		started++
		most = max(most, running)
		if running == 3 {
			close(all3)
		}
		first := started <= 3
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		if first {
			select {
			case <-all3:
			case <-time.After(20 * time.Second):
				return handler.Permanent(fmt.Errorf("ran alone: the other handlers of the round never started"))
			}
		}
		return nil
	}), inbox.WorkerConfig{Concurrency: 3})
	n, err := w.Drain(context.Background())
	is.NoErr(err)
	is.Equal(n, 5)
	is.Equal(most, 3) // three at once, never more
	is.Equal(statusSummary(t, pool), "COMPLETED=5")
}
