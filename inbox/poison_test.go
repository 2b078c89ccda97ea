package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// poisonPayload is short as text, but PostgreSQL's numeric prints each
// 1e131071 as 131,072 digits: as jsonb it renders to more than 1 GB.
func poisonPayload() string {
	return "[" + strings.Repeat("1e131071,", 8200) + "1e131071]"
}

// The accept limits bound what the database would print, not only the
// canonical text: the 74 KB poison payload is too large.
func TestAcceptRejectsNumbersThatExpand(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	for _, payload := range []string{
		poisonPayload(),
		"[" + strings.Repeat("1e-16383,", 100) + "1e-16383]", // 16,385 bytes each in plain decimal
	} {
		_, err := c.Accept(context.Background(), orderMsg("poison", json.RawMessage(payload)))
		var verr *inbox.ValidationError
		if !errors.As(err, &verr) || verr.Rule != inbox.RuleTooLarge {
			t.Fatalf("want a too_large *ValidationError, got %v", err)
		}
		if !strings.Contains(verr.Detail, "plain decimal") {
			t.Fatalf("the detail should say numbers count at their plain decimal length: %s", verr.Detail)
		}
	}
	if n := countRows(t, pool, "true"); n != 0 {
		t.Fatalf("%d receipts stored", n)
	}
}

// Handlers and the admin API get the canonical JSON the fingerprint covers,
// byte for byte, not a re-rendering; large numbers included.
func TestHandlerGetsCanonicalPayload(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	in := map[string]string{
		"keys":  `{"b":[1.50,2e2],"aa":1}`,
		"large": `[1e131071,-1e-16383]`,
	}
	want := map[string]string{
		"keys":  `{"aa":1,"b":[1.5,200]}`,
		"large": `[1e+131071,-1e-16383]`,
	}
	for id, p := range in {
		acceptAll(t, c, orderMsg(id, json.RawMessage(p)))
	}
	var mu sync.Mutex
	got := map[string]string{}
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.MessageID] = string(m.Payload)
		return nil
	}), inbox.WorkerConfig{})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 2)
	is.Equal(got, want)

	admin := admNew(t, pool)
	page, err := admin.Operator().List(ctx, inbox.ListParams{})
	is.NoErr(err)
	for _, r := range page.Receipts {
		d, err := admin.Operator().Get(ctx, r.ID)
		is.NoErr(err)
		is.Equal(string(d.Payload), want[r.MessageID])
	}
}

// Defence in depth: claims never load payloads, the handler's transaction
// does. A receipt whose payload the server cannot produce (here a database
// that still stores jsonb, holding the poison payload written before the
// accept limits counted plain decimal length) fails its own attempt, bounded
// by the handler's timeout, and the consumer's later receipts complete.
func TestUnloadableReceiptDoesNotBlockItsConsumer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	_, err := pool.Exec(ctx, "ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE jsonb USING payload::jsonb")
	is.NoErr(err)
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, fingerprint, payload, available_at, max_attempts)
		VALUES (gen_random_uuid(), 'tenant', 'tenant-a', 'orders-service', 'orders.projection.v1', 'poison', 'order.created', 1, $1, $2::jsonb, now() - interval '1 hour', 1)`,
		make([]byte, 32), poisonPayload())
	is.NoErr(err)
	c := newClient(t, pool, inbox.Config{})
	acceptAll(t, c,
		orderMsg("ok-1", map[string]string{"orderId": "o-1"}),
		orderMsg("ok-2", map[string]string{"orderId": "o-2"}))

	var handled sync.Map
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		handled.Store(m.MessageID, true)
		return nil
	}), inbox.WorkerConfig{Concurrency: 2, HandlerTimeout: 2 * time.Second})
	_, err = w.Drain(ctx)
	is.NoErr(err)
	for _, id := range []string{"ok-1", "ok-2"} {
		_, ok := handled.Load(id)
		is.True(ok)
	}
	var status, lastError string
	is.NoErr(pool.QueryRow(ctx, "SELECT status, last_error FROM pginbox_receipts WHERE message_id = 'poison'").Scan(&status, &lastError))
	is.Equal(status, "DEAD")
	is.True(strings.Contains(lastError, "loading its payload"))
	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), 2)
}
