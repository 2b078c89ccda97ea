package inbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestWorkerClaimsOnlyOwnedConsumers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trace := &claimTrace{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trace })
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})

	const billing = "billing.v1"
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error { return writeEffect(ctx, m, "orders") })
	var billingCalls atomic.Int32
	is.NoErr(reg.Register(handler.Key{Consumer: billing, EventType: "order.created", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			billingCalls.Add(1)
			return writeEffect(ctx, m, "billing")
		}))

	var orders, bills []inbox.ID
	for i := range 5 {
		orders = append(orders, acceptAll(t, c, orderMsg(fmt.Sprintf("o-%d", i), raw(`{"orderId":"o"}`)))...)
		m := orderMsg(fmt.Sprintf("b-%d", i), raw(`{"orderId":"o"}`))
		m.Consumer = billing
		bills = append(bills, acceptAll(t, c, m)...)
	}
	// A billing receipt with an expired lease: not this worker's to recover.
	inboxtest.SetState(t, pool, bills[0], "status = 'PROCESSING', attempts = 1, lease_expires_at = now() - interval '1 second'")

	w := newWorker(t, pool, reg, inbox.WorkerConfig{Consumers: []string{"orders.projection.v1"}, Lease: 600 * time.Millisecond, PollInterval: 100 * time.Millisecond})
	is.Equal(w.Consumers(), []string{"orders.projection.v1"})
	startWorker(t, w)
	for _, id := range orders {
		waitStatus(t, pool, id, "COMPLETED", 10*time.Second)
	}
	// Several polls and a recovery round later, billing is untouched.
	trace.waitClaims(t, 3)
	recovered, err := w.RecoverExpired(ctx)
	is.NoErr(err)
	is.Equal(recovered, 0)
	is.Equal(billingCalls.Load(), int32(0))
	is.Equal(effectCount(t, pool, "worker = 'billing'"), 0)
	is.Equal(stateOf(t, pool, bills[0]).Status, "PROCESSING")
	for _, id := range bills[1:] {
		st := stateOf(t, pool, id)
		is.Equal(st.Status, "PENDING")
		is.Equal(st.Attempts, 0)
	}

	n, err := w.RecoverExpired(ctx)
	is.NoErr(err)
	is.Equal(n, 0)
}
