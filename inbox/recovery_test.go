package inbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestRecoveryOfExpiredLeases(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	setupEffects(t, pool)
	ids := acceptAll(t, newClient(t, pool, inbox.Config{}),
		orderMsg("evt-live", raw(`{"orderId":"o-1"}`)),
		orderMsg("evt-spent", raw(`{"orderId":"o-2"}`)))
	live, spent := ids[0], ids[1]
	// As a crashed worker leaves them: claimed, lease in the past.
	const expire = "status = 'PROCESSING', lease_expires_at = now() - interval '1 second', attempts = "
	inboxtest.SetState(t, pool, live, expire+"1")
	inboxtest.SetState(t, pool, spent, expire+"max_attempts")

	startWorker(t, newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "w")
	}), inbox.WorkerConfig{Lease: time.Second}))

	st := waitStatus(t, pool, live, "COMPLETED", 10*time.Second)
	is.Equal(st.Attempts, 2)
	is.Equal(effectCount(t, pool, "message_id = 'evt-live'"), 1)

	st = waitStatus(t, pool, spent, "DEAD", 10*time.Second)
	is.Equal(st.Attempts, inbox.DefaultMaxAttempts) // recovery itself spends no attempt
	if st.LastError == nil || !strings.Contains(*st.LastError, "lease expired") {
		t.Fatalf("last_error = %s, want a lease expiry", deref(st.LastError))
	}
	is.Equal(effectCount(t, pool, "message_id = 'evt-spent'"), 0)
}
