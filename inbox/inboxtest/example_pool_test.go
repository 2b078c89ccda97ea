package inboxtest_test

import (
	"context"
	"testing"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// WidgetCreated is the payload of the application's widget.created event.
type WidgetCreated struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// widgetCreatedTest is an application's test; in your _test.go file it is
// TestWidgetCreated, beside a TestMain that calls inboxtest.SetMigrate with
// the migration creating the widgets table, then inboxtest.Main.
func widgetCreatedTest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := inboxtest.Pool(t) // a fresh database: pginbox's schema and the widgets table

	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: "widgets.v1", EventType: "widget.created", SchemaVersion: 1},
		handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, w WidgetCreated) error {
			_, err := m.Tx.Exec(ctx, `INSERT INTO widgets (id, name) VALUES ($1, $2)`, w.ID, w.Name)
			return err
		}))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}

	msg := inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("acme"), Source: "catalog", Consumer: "widgets.v1", MessageID: "evt-1"},
		EventType:     "widget.created",
		SchemaVersion: 1,
		Payload:       WidgetCreated{ID: 1, Name: "sprocket"},
	}
	if _, err := client.Accept(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if n := inboxtest.Drain(t, worker); n != 1 { // runs the handler synchronously
		t.Fatalf("handled %d receipts, want 1", n)
	}
	// On failure: the status found, the attempts and the last error.
	inboxtest.RequireStatus(t, pool, msg.Identity, inbox.StatusCompleted)
	var name string
	if err := pool.QueryRow(ctx, `SELECT name FROM widgets WHERE id = 1`).Scan(&name); err != nil || name != "sprocket" {
		t.Fatalf("widget 1: %q, %v; want sprocket", name, err)
	}
}

// Pool gives each test a database of its own with pginbox's schema and the
// application's, Drain runs a worker synchronously, and RequireStatus checks
// what the inbox stored. An example gets no *testing.T, so this one shows the
// test above; this package's TestPoolExample runs it.
func ExamplePool() {}
