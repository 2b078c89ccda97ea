//go:build unix

package outbox_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/childtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// The relay crash child publishes from the outbox at envOutboxDSN into the
// inbox at envInboxDSN, then stops between publishing and marking, to be
// killed there.
const (
	envOutboxDSN = "PGINBOX_RELAY_CHILD_OUTBOX"
	envInboxDSN  = "PGINBOX_RELAY_CHILD_INBOX"
	// crashLease is long so that publishing under a loaded machine fits in
	// the child's PublishTimeout (Lease/3); the parent expires the lease by
	// hand rather than waiting it out.
	crashLease = 30 * time.Second
)

func TestRelayCrashChild(t *testing.T) {
	outboxDSN, inboxDSN := os.Getenv(envOutboxDSN), os.Getenv(envInboxDSN)
	if outboxDSN == "" {
		t.Skip("only runs as a child process of TestRelayCrashAfterPublishBeforeMark")
	}
	childtest.ExitWithParent()
	client := inboxClient(t, poolOn(t, inboxDSN), inbox.Config{})
	r := newRelay(t, poolOn(t, outboxDSN), outbox.InboxPublisher{Client: client}, outbox.RelayConfig{Lease: crashLease})
	outbox.SetAfterPublish(r, func(published []outbox.ID) {
		childtest.Mark("published %d", len(published))
		select {} // the parent kills us here
	})
	n, err := r.Drain(context.Background())
	t.Fatalf("Drain returned (%d, %v) without reaching the crash point", n, err)
}

// A relay killed after publishing and before marking leaves its events
// PUBLISHING. Once the lease expires they are published again, and the
// receiving inbox turns the second delivery into a Duplicate: one receipt,
// one business effect per event.
func TestRelayCrashAfterPublishBeforeMark(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	outboxDSN, inboxDSN := inboxtest.Database(t), inboxtest.Database(t)
	a, b := poolOn(t, outboxDSN), poolOn(t, inboxDSN)
	_, err := b.Exec(ctx, "CREATE TABLE effects (message_id text NOT NULL)") // no unique key: a double apply shows
	is.NoErr(err)
	ids := emit(t, a, event("o-1", 1), event("o-1", 2), event("", 3))

	child := childtest.Start(t, "TestRelayCrashChild", envOutboxDSN+"="+outboxDSN, envInboxDSN+"="+inboxDSN)
	is.Equal(child.Marker(t), "published 3")
	child.Kill(t)
	is.Equal(count(t, a, "status = 'PUBLISHING'"), 3) // never marked
	var receipts int
	is.NoErr(b.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&receipts))
	is.Equal(receipts, 3) // but delivered

	// Another relay takes over once the lease expired: expire it now.
	_, err = a.Exec(ctx, "UPDATE pginbox_outbox SET lease_expires_at = now() - interval '1 second' WHERE status = 'PUBLISHING'")
	is.NoErr(err)
	var republished atomic.Int64
	pub := publisherFunc(func(ctx context.Context, msgs []outbox.Message) []error {
		republished.Add(int64(len(msgs)))
		return outbox.InboxPublisher{Client: inboxClient(t, b, inbox.Config{})}.Publish(ctx, msgs)
	})
	r := newRelay(t, a, pub, outbox.RelayConfig{Lease: crashLease})
	testkit.Eventually(t, 30*time.Second, func() bool {
		if _, err := r.RecoverExpired(ctx); err != nil {
			t.Fatal(err)
		}
		return count(t, a, "status = 'PUBLISHING'") == 0
	}, "the killed relay's lease to expire and be recovered")
	for _, id := range ids {
		s := row(t, a, id)
		is.Equal(s.status, "PENDING")
		is.True(strings.Contains(s.lastError, "it may have been published"))
	}
	is.Equal(drain(t, r), 3)
	is.Equal(republished.Load(), int64(3)) // each event went out a second time
	is.Equal(count(t, a, "status = 'PUBLISHED'"), 3)
	is.NoErr(b.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&receipts))
	is.Equal(receipts, 3) // the second delivery was a Duplicate

	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "billing.v1", EventType: "order.confirmed", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, "INSERT INTO effects (message_id) VALUES ($1)", m.MessageID)
			return err
		}))
	w, err := inbox.NewWorker(b, reg, inbox.WorkerConfig{Logger: quiet})
	is.NoErr(err)
	is.Equal(inboxtest.Drain(t, w), 3)
	for _, id := range ids {
		var n int
		is.NoErr(b.QueryRow(ctx, "SELECT count(*) FROM effects WHERE message_id = $1", id.String()).Scan(&n))
		is.Equal(n, 1) // one business effect per event
	}
	t.Log("3 events published twice around a SIGKILL: 3 receipts, 3 effects")
}
