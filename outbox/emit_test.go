package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// An event emitted by a handler through m.Tx exists only if the handler's
// transaction commits: a failed attempt leaves no event, the successful one
// leaves exactly one, carrying the handled message's context.
func TestEmitJoinsTheHandlersFate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)

	client, err := inbox.NewClient(pool, inbox.Config{Logger: quiet})
	is.NoErr(err)
	identity := inbox.Identity{Scope: inbox.Tenant("acme"), Source: "storefront", Consumer: "orders.v1", MessageID: "evt-1"}
	_, err = client.Accept(ctx, inbox.Message{
		Identity: identity, EventType: "order.placed", SchemaVersion: 1,
		Payload: map[string]any{"orderId": "o-1"},
		Metadata: map[string]string{
			"traceparent":    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"tracestate":     "vendor=1",
			"correlation_id": "checkout-77",
			"unrelated":      "not carried",
		},
	})
	is.NoErr(err)

	var emitted []outbox.ID
	leftByFirstAttempt := -1
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "orders.v1", EventType: "order.placed", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if m.Attempt == 2 {
				// What the failed first attempt left behind, seen from outside
				// its transaction.
				leftByFirstAttempt = count(t, pool, "true")
			}
			id, err := outbox.Emit(ctx, m.Tx, outbox.Event{
				Type: "order.confirmed", SchemaVersion: 1, Source: "orders", Destination: "billing.v1",
				Payload: json.RawMessage(m.Payload), Metadata: map[string]string{"tracestate": "mine"},
			})
			if err != nil {
				return err
			}
			emitted = append(emitted, id)
			if m.Attempt == 1 {
				return errors.New("downstream check failed") // rolls back the emit with everything else
			}
			return nil
		}))
	// No backoff: the retry is due at once, and the same Drain runs it.
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Logger: quiet, Backoff: func(int) time.Duration { return 0 }})
	is.NoErr(err)

	is.Equal(inboxtest.Drain(t, w), 2)
	inboxtest.RequireStatus(t, pool, identity, inbox.StatusCompleted)
	is.Equal(len(emitted), 2)           // both attempts emitted...
	is.Equal(leftByFirstAttempt, 0)     // ...the failed one's event rolled back with it
	is.Equal(count(t, pool, "true"), 1) // the committed attempt's event
	is.Equal(count(t, pool, "id = $1 AND status = 'PENDING'", emitted[1]), 1)

	admin, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: quiet})
	is.NoErr(err)
	ev, err := admin.Get(ctx, emitted[1])
	is.NoErr(err)
	is.Equal(ev.Metadata, map[string]string{
		outbox.MetadataCausationID:   "evt-1",
		outbox.MetadataCorrelationID: "checkout-77",
		outbox.MetadataTraceparent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		outbox.MetadataTracestate:    "mine", // set by the caller, who wins
	})
	is.Equal(string(ev.Payload), `{"orderId":"o-1"}`)
}

// Outside a handler, Emit adds nothing to the metadata.
func TestEmitOutsideAHandlerCarriesNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	ev := event("", 1)
	ev.Metadata = map[string]string{"k": "v"}
	id := emit(t, pool, ev)[0]
	var md string
	is.NoErr(pool.QueryRow(context.Background(), "SELECT metadata::text FROM pginbox_outbox WHERE id = $1", id).Scan(&md))
	is.Equal(md, `{"k": "v"}`)
}

// An invalid event is a *inbox.ValidationError naming the field and rule;
// nothing is stored and the caller's transaction stays usable.
func TestEmitValidation(t *testing.T) {
	t.Parallel()
	pool := inboxtest.Pool(t)
	ctx := context.Background()
	bad := func(f func(*outbox.Event)) outbox.Event {
		ev := event("k", 1)
		f(&ev)
		return ev
	}
	for _, tc := range []struct {
		name  string
		ev    outbox.Event
		field string
		rule  inbox.Rule
	}{
		{"no type", bad(func(e *outbox.Event) { e.Type = "" }), "event_type", inbox.RuleRequired},
		{"type with a tab", bad(func(e *outbox.Event) { e.Type = "a\tb" }), "event_type", inbox.RuleControlChar},
		{"no source", bad(func(e *outbox.Event) { e.Source = "" }), "source", inbox.RuleRequired},
		{"no destination", bad(func(e *outbox.Event) { e.Destination = "" }), "destination", inbox.RuleRequired},
		{"long destination", bad(func(e *outbox.Event) { e.Destination = strings.Repeat("d", 256) }), "destination", inbox.RuleTooLong},
		{"bad ordering key", bad(func(e *outbox.Event) { e.OrderingKey = "a\xffb" }), "ordering_key", inbox.RuleInvalidUTF8},
		{"version 0", bad(func(e *outbox.Event) { e.SchemaVersion = 0 }), "schema_version", inbox.RuleOutOfRange},
		{"payload not JSON", bad(func(e *outbox.Event) { e.Payload = []byte(`{"a":`) }), "payload", inbox.RuleInvalidJSON},
		{"payload duplicate key", bad(func(e *outbox.Event) { e.Payload = json.RawMessage(`{"a":1,"a":2}`) }), "payload", inbox.RuleDuplicateKey},
		{"payload NUL", bad(func(e *outbox.Event) { e.Payload = json.RawMessage(`{"a":"\u0000"}`) }), "payload", inbox.RuleNullCharacter},
		{"metadata NUL", bad(func(e *outbox.Event) { e.Metadata = map[string]string{"k": "a\x00"} }), "metadata", inbox.RuleNullCharacter},
		{"metadata invalid UTF-8", bad(func(e *outbox.Event) { e.Metadata = map[string]string{"k\xff": "v"} }), "metadata", inbox.RuleInvalidUTF8},
		// What a receiving inbox refuses by default.
		{"metadata too large", bad(func(e *outbox.Event) {
			e.Metadata = map[string]string{"k": strings.Repeat("v", inbox.DefaultMaxMetadataBytes)}
		}), "metadata", inbox.RuleTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := outbox.Emit(ctx, tx, tc.ev)
				var ve *inbox.ValidationError
				is.True(errors.As(err, &ve)) // a validation error
				is.Equal(ve.Field, tc.field)
				is.Equal(ve.Rule, tc.rule)
				is.True(errors.Is(err, inbox.ErrInvalid))
				// The transaction is still usable.
				_, err = outbox.Emit(ctx, tx, event("ok-"+tc.name, 1))
				return err
			})
			is.NoErr(err)
		})
	}
	is := is.New(t)
	is.Equal(count(t, pool, "ordering_key LIKE 'ok-%'"), 13)
	is.Equal(count(t, pool, "ordering_key NOT LIKE 'ok-%'"), 0)
}

func TestEmitDuplicateIDKeepsTheTransactionUsable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	ev := event("k", 1)
	ev.ID = emit(t, pool, ev)[0]
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, ev)
		is.True(errors.Is(err, outbox.ErrDuplicateEvent))
		is.True(strings.Contains(err.Error(), ev.ID.String()))
		_, err = outbox.Emit(ctx, tx, event("k", 2))
		return err
	})
	is.NoErr(err)
	is.Equal(count(t, pool, "true"), 2)
}

// Payloads are stored as their canonical JSON, the text publishers send.
func TestEmitStoresCanonicalPayload(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	ev := event("", 0)
	ev.Payload = json.RawMessage(`{ "b": [1.50, 2e2], "a": "x" }`)
	id := emit(t, pool, ev)[0]
	var text string
	is.NoErr(pool.QueryRow(context.Background(), "SELECT payload::text FROM pginbox_outbox WHERE id = $1", id).Scan(&text))
	is.Equal(text, `{"a":"x","b":[1.5,200]}`)
}

// Emits of one ordering key serialize their transactions, so emit order
// (seq) is commit order; other keys and unordered events do not wait.
func TestEmitOrderingKeySerializesTransactions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)

	first, err := pool.Begin(ctx)
	is.NoErr(err)
	defer first.Rollback(ctx)
	firstID, err := outbox.Emit(ctx, first, event("order-1", 1))
	is.NoErr(err)

	// Another key and an unordered event go through at once.
	other := emit(t, pool, event("order-2", 1), event("", 1))
	is.Equal(len(other), 2)

	var wg sync.WaitGroup
	var secondID outbox.ID
	var secondErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		secondErr = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			id, err := outbox.Emit(ctx, tx, event("order-1", 2))
			secondID = id
			return err
		})
	}()
	testkit.Eventually(t, 10*time.Second, func() bool {
		var waiting int
		is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&waiting))
		return waiting == 1
	}, "the second emit of order-1 to wait for the key lock")
	is.NoErr(first.Commit(ctx))
	wg.Wait()
	is.NoErr(secondErr)

	var firstSeq, secondSeq int64
	is.NoErr(pool.QueryRow(ctx, "SELECT seq FROM pginbox_outbox WHERE id = $1", firstID).Scan(&firstSeq))
	is.NoErr(pool.QueryRow(ctx, "SELECT seq FROM pginbox_outbox WHERE id = $1", secondID).Scan(&secondSeq))
	is.True(firstSeq < secondSeq)
}

type confirmed struct {
	OrderID string `json:"orderId"`
}

func (c confirmed) Validate() error {
	if c.OrderID == "" {
		return errors.New("orderId is required")
	}
	return nil
}

func (c confirmed) OrderingKey() string { return c.OrderID }

type shipped struct{ OrderID string }

func (s *shipped) OrderingKey() string { return "ship-" + s.OrderID }

func TestNewEvent(t *testing.T) {
	is := is.New(t)
	head := outbox.Event{Type: "order.confirmed", SchemaVersion: 1, Source: "orders", Destination: "billing.v1"}

	ev, err := outbox.NewEvent(head, confirmed{OrderID: "o-1"})
	is.NoErr(err)
	is.Equal(ev.OrderingKey, "o-1") // from the payload's method
	is.Equal(ev.Payload, confirmed{OrderID: "o-1"})
	is.Equal(ev.Destination, "billing.v1")

	_, err = outbox.NewEvent(head, confirmed{})
	var ve *inbox.ValidationError
	is.True(errors.As(err, &ve))
	is.Equal(ve.Rule, inbox.RuleValidate)
	is.Equal(ve.Field, "payload")
	is.True(strings.Contains(ve.Detail, "orderId is required"))

	ev, err = outbox.NewEvent(head, shipped{OrderID: "o-2"}) // pointer receiver
	is.NoErr(err)
	is.Equal(ev.OrderingKey, "ship-o-2")

	head.OrderingKey = "explicit"
	ev, err = outbox.NewEvent(head, confirmed{OrderID: "o-3"})
	is.NoErr(err)
	is.Equal(ev.OrderingKey, "explicit") // the caller's key wins
}

func TestEmitNilTx(t *testing.T) {
	is := is.New(t)
	_, err := outbox.Emit(context.Background(), nil, event("", 1))
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "tx is nil"))
}

// A pgx.Tx, which a handler's m.Tx is, is what Emit writes through.
var _ outbox.Tx = pgx.Tx(nil)
