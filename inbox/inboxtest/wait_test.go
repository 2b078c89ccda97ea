package inboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestDrainHandlesEverythingDue(t *testing.T) {
	t.Parallel()
	pool, c, w := setup(t, ok)
	var ids []inbox.ID
	for i := range 5 {
		ids = append(ids, accept(t, c, fmt.Sprint("evt-", i)))
	}
	if n := inboxtest.Drain(t, w); n != 5 {
		t.Fatalf("Drain handled %d, want 5", n)
	}
	for _, id := range ids {
		inboxtest.WaitForStatus(t, pool, id, inbox.StatusCompleted, 0)
	}
	if n := inboxtest.Drain(t, w); n != 0 {
		t.Fatalf("second Drain handled %d, want 0", n)
	}
}

func TestDrainFailsTheTestOnError(t *testing.T) {
	t.Parallel()
	_, _, w := setup(t, ok)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	msg := failure(t, func(t testing.TB) { inboxtest.Drain(t, w) })
	if !strings.Contains(msg, "inboxtest.Drain: ") {
		t.Fatalf("Drain on a started worker reported %q", msg)
	}
}

func TestWaitForStatusWaitsForARunningWorker(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	pool, c, w := setup(t, func(ctx context.Context, m *handler.Msg) error {
		<-release
		return nil
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	id := accept(t, c, "evt-1")
	inboxtest.WaitForStatus(t, pool, id, inbox.StatusProcessing, 5*time.Second)
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	r := inboxtest.WaitForStatus(t, pool, id, inbox.StatusCompleted, 5*time.Second)
	if r.Attempts != 1 || r.LastError != "" {
		t.Fatalf("got %+v, want one clean attempt", r)
	}
}

func TestWaitForStatusReturnsTheLastError(t *testing.T) {
	t.Parallel()
	pool, c, w := setup(t, func(context.Context, *handler.Msg) error {
		return handler.Permanent(errors.New("customer deleted"))
	})
	id := accept(t, c, "evt-1")
	inboxtest.Drain(t, w)
	r := inboxtest.WaitForStatus(t, pool, id, inbox.StatusDead, 0)
	if r.LastError != "customer deleted" || r.Attempts != 1 {
		t.Fatalf("got %+v", r)
	}
}

func TestWaitForStatusFailures(t *testing.T) {
	t.Parallel()
	pool, c, w := setup(t, func(context.Context, *handler.Msg) error {
		return handler.Permanent(errors.New("customer deleted"))
	})
	pending := acceptFor(t, c, identity("not.handled.v1", "evt-pending")) // no worker runs it
	dead := accept(t, c, "evt-dead")
	inboxtest.Drain(t, w)

	cases := []struct {
		name    string
		id      inbox.ID
		timeout time.Duration
		want    string
	}{
		{"timeout", pending, 200 * time.Millisecond, "want COMPLETED within 200ms, found receipt " + pending.String() + " global/test/not.handled.v1/evt-pending (order.created v1): PENDING, attempts 0"},
		// DEAD will not become COMPLETED: fail at once, with the reason.
		{"final status", dead, time.Hour, "want COMPLETED, found a final status: receipt " + dead.String() + " global/test/orders.projection.v1/evt-dead (order.created v1): DEAD, attempts 1, last error: customer deleted"},
		{"missing", inbox.ID{1}, time.Hour, "no receipt " + inbox.ID{1}.String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			msg := failure(t, func(t testing.TB) {
				inboxtest.WaitForStatus(t, pool, tc.id, inbox.StatusCompleted, tc.timeout)
			})
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("failure %q does not contain %q", msg, tc.want)
			}
			// It does not give up before the timeout. (A final status or a
			// missing receipt fails at once; otherwise this test would hang.)
			if took := time.Since(start); tc.timeout < time.Hour && took < tc.timeout {
				t.Fatalf("failed after %v, before the %v timeout", took, tc.timeout)
			}
		})
	}
}
