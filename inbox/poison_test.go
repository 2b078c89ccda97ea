package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// poisonPayload is short as text, but PostgreSQL's numeric prints each
// 1e131071 as 131,072 digits: as jsonb it would render to more than 1 GB.
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

// Defence in depth: claims never load payloads; the handler's transaction
// does (ReceiptStart). A receipt that cannot be started (here a trigger makes
// its start fail, as a payload the server cannot produce would) fails its own
// attempt, alone, also inside a batch, and the consumer's other receipts
// complete.
func TestUnstartableReceiptDoesNotBlockItsConsumer(t *testing.T) {
	t.Parallel()
	for _, perTx := range []int{1, 5} {
		t.Run(fmt.Sprintf("MessagesPerTx=%d", perTx), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx := context.Background()
			pool, _ := newPool(t)
			_, err := pool.Exec(ctx, `
				CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					RAISE EXCEPTION 'cannot produce the payload of %', NEW.message_id;
				END $$;
				CREATE TRIGGER refuse_poison BEFORE UPDATE ON pginbox_receipts FOR EACH ROW
					WHEN (NEW.message_id = 'poison' AND NEW.status = 'COMPLETED') EXECUTE FUNCTION refuse_poison()`)
			is.NoErr(err)
			c := newClient(t, pool, inbox.Config{MaxAttempts: 1})
			acceptAll(t, c,
				orderMsg("poison", map[string]string{"orderId": "o-0"}), // the oldest: every claim takes it first
				orderMsg("ok-1", map[string]string{"orderId": "o-1"}),
				orderMsg("ok-2", map[string]string{"orderId": "o-2"}))

			var handled sync.Map
			w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
				handled.Store(m.MessageID, true)
				return nil
			}), inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: perTx, PollInterval: 50 * time.Millisecond})
			startWorker(t, w)
			testkit.Eventually(t, 10*time.Second, func() bool {
				return countRows(t, pool, "status IN ('COMPLETED', 'DEAD')") == 3
			}, "every receipt settled")
			_, poisonRan := handled.Load("poison")
			is.True(!poisonRan)
			is.Equal(countRows(t, pool, "status = 'COMPLETED'"), 2)
			var lastError string
			is.NoErr(pool.QueryRow(ctx, "SELECT last_error FROM pginbox_receipts_live WHERE message_id = 'poison' AND status = 'DEAD'").Scan(&lastError))
			is.True(strings.Contains(lastError, "cannot produce the payload of poison"))
		})
	}
}
