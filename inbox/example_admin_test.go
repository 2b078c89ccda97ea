package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// exampleAdmin returns the admin view of tenant-a, the tenant of orderMsg.
func exampleAdmin(pool *pgxpool.Pool) *inbox.AdminView {
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: discardLogger})
	if err != nil {
		panic(err)
	}
	return admin.ForTenant("tenant-a")
}

// drain runs reg's handlers on everything due, as a worker would.
func drain(ctx context.Context, pool *pgxpool.Pool, reg *handler.Registry) int {
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Logger: discardLogger})
	if err != nil {
		panic(err)
	}
	n, err := w.Drain(ctx)
	if err != nil {
		panic(err)
	}
	return n
}

// A DEAD receipt goes back to PENDING with a fresh retry budget once the cause
// is fixed. The requeue names the version the operator looked at: if the
// receipt changed since, nothing happens.
func ExampleAdminView_Requeue() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	fixed := false
	reg := projection(ctx, pool, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
		if !fixed {
			return handler.Permanent(errors.New("unknown currency"))
		}
		return nil
	})
	res, err := client.Accept(ctx, orderMsg("evt-1", OrderCreated{OrderID: "o-1"}))
	if err != nil {
		panic(err)
	}
	drain(ctx, pool, reg)

	tenant := exampleAdmin(pool)
	r, err := tenant.Get(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Status, r.LastError)

	_, err = tenant.Requeue(ctx, res.ID, inbox.ChangeParams{ExpectedVersion: r.Version - 1, Actor: "alice", Reason: "currency added"})
	fmt.Println("stale version refused:", errors.Is(err, inbox.ErrVersionConflict))

	fixed = true // the deploy that fixes the cause
	rq, err := tenant.Requeue(ctx, res.ID, inbox.ChangeParams{ExpectedVersion: r.Version, Actor: "alice", Reason: "currency added"})
	if err != nil {
		panic(err)
	}
	fmt.Println("requeued from", rq.FromStatus)
	drain(ctx, pool, reg)

	r, err = tenant.Get(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	a := r.Audit[0]
	fmt.Println(r.Status, "after attempt", r.Attempts)
	fmt.Printf("audit: %s by %s (%s), %s -> %s\n", a.Action, a.Actor, a.Reason, a.FromStatus, a.ToStatus)

	// Output:
	// DEAD unknown currency
	// stale version refused: true
	// requeued from DEAD
	// COMPLETED after attempt 1
	// audit: requeue by alice (currency added), DEAD -> PENDING
}

// Replay runs a COMPLETED receipt's handler again, as a new receipt linked to
// the original (to rebuild a projection, say). The original stays COMPLETED,
// and a redelivery of its message is still a duplicate.
func ExampleAdminView_Replay() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	runs := 0
	reg := projection(ctx, pool, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
		runs++
		_, err := m.Tx.Exec(ctx, `DELETE FROM order_projection WHERE order_id = $1`, e.OrderID) // rebuild the row
		return err
	})
	msg := orderMsg("evt-1", OrderCreated{OrderID: "o-1"})
	res, err := client.Accept(ctx, msg)
	if err != nil {
		panic(err)
	}
	drain(ctx, pool, reg)

	tenant := exampleAdmin(pool)
	r, err := tenant.Get(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	rp, err := tenant.Replay(ctx, res.ID, inbox.ChangeParams{ExpectedVersion: r.Version, Actor: "alice", Reason: "rebuild projection"})
	if err != nil {
		panic(err)
	}
	_, err = tenant.Replay(ctx, res.ID, inbox.ChangeParams{ExpectedVersion: r.Version, Actor: "bob", Reason: "rebuild projection"})
	fmt.Println("second replay of the same version refused:", errors.Is(err, inbox.ErrVersionConflict))
	drain(ctx, pool, reg)
	fmt.Println("handler runs:", runs)

	replay, err := tenant.Get(ctx, rp.NewID)
	if err != nil {
		panic(err)
	}
	fmt.Println("replay:", replay.Status, replay.ReplayOf == res.ID)
	again, err := client.Accept(ctx, msg)
	if err != nil {
		panic(err)
	}
	fmt.Println("redelivery:", again.Outcome, again.ID == res.ID)

	// Output:
	// second replay of the same version refused: true
	// handler runs: 2
	// replay: COMPLETED true
	// redelivery: duplicate true
}

// Retention drops the payloads of old COMPLETED receipts and keeps their
// identity and fingerprint, so redeliveries still deduplicate. A dry run
// counts first.
func ExampleAdminView_Purge() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	reg := projection(ctx, pool, func(context.Context, *handler.Msg, OrderCreated) error { return nil })
	msg := orderMsg("evt-1", OrderCreated{OrderID: "o-1"})
	res, err := client.Accept(ctx, msg)
	if err != nil {
		panic(err)
	}
	if _, err := client.Accept(ctx, orderMsg("evt-2", OrderCreated{OrderID: "o-2"})); err != nil {
		panic(err)
	}
	drain(ctx, pool, reg)

	// In production: inbox.PurgeParams{OlderThan: 30 * 24 * time.Hour}.
	params := inbox.PurgeParams{Before: time.Now(), BatchSize: 1000}
	tenant := exampleAdmin(pool)
	n, _, err := tenant.PurgeCount(ctx, params)
	if err != nil {
		panic(err)
	}
	fmt.Println("dry run:", n)
	purged, err := tenant.Purge(ctx, params)
	if err != nil {
		panic(err)
	}
	fmt.Println("purged:", purged.Purged)

	again, err := client.Accept(ctx, msg)
	if err != nil {
		panic(err)
	}
	fmt.Println("redelivery:", again.Outcome, again.Status)
	r, err := tenant.Get(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	_, err = tenant.Replay(ctx, res.ID, inbox.ChangeParams{ExpectedVersion: r.Version, Actor: "alice", Reason: "rebuild"})
	fmt.Println("replay refused:", errors.Is(err, inbox.ErrPayloadPurged))

	// Output:
	// dry run: 2
	// purged: 2
	// redelivery: duplicate COMPLETED
	// replay refused: true
}
