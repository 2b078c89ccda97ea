package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// effectsTable has no unique constraint on purpose: a message applied twice
// shows up as two rows instead of a constraint error that hides it.
const effectsTable = `CREATE TABLE effects (
	message_id text NOT NULL,
	receipt_id uuid NOT NULL,
	worker     text NOT NULL,
	attempt    int  NOT NULL
)`

func setupEffects(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), effectsTable); err != nil {
		t.Fatal(err)
	}
}

// writeEffect is the business write of the effects-based tests.
func writeEffect(ctx context.Context, m *handler.Msg, worker string) error {
	_, err := m.Tx.Exec(ctx, "INSERT INTO effects (message_id, receipt_id, worker, attempt) VALUES ($1, $2, $3, $4)",
		m.MessageID, m.ReceiptID, worker, m.Attempt)
	return err
}

func effectCount(t testing.TB, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM effects WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// requireOneEffectPerReceipt checks the inbox guarantee over the whole
// database: every receipt is COMPLETED and applied exactly once.
func requireOneEffectPerReceipt(t testing.TB, pool *pgxpool.Pool, wantReceipts int) {
	t.Helper()
	ctx := context.Background()
	var receipts, completed, effects int
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED'),
		(SELECT count(*) FROM effects) FROM pginbox_receipts_live`).Scan(&receipts, &completed, &effects)
	if err != nil {
		t.Fatal(err)
	}
	if wantReceipts >= 0 && receipts != wantReceipts {
		t.Errorf("%d receipts, want %d", receipts, wantReceipts)
	}
	if completed != receipts {
		t.Errorf("%d of %d receipts COMPLETED; others: %s", completed, receipts, statusSummary(t, pool))
	}
	rows, err := pool.Query(ctx, `
		SELECT r.message_id, count(e.message_id)
		FROM pginbox_receipts_live r LEFT JOIN effects e ON e.message_id = r.message_id
		GROUP BY r.message_id HAVING count(e.message_id) <> 1
		ORDER BY r.message_id LIMIT 10`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("message %s has %d business rows, want 1", id, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if effects != receipts {
		t.Errorf("%d business rows for %d receipts", effects, receipts)
	}
}

// statusSummary is "STATUS=n, ..." over all receipts, for failure messages.
func statusSummary(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT status, count(*) FROM pginbox_receipts_live GROUP BY status ORDER BY status")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s=%d", s, n))
	}
	return strings.Join(parts, ", ")
}

func waitStatus(t testing.TB, pool *pgxpool.Pool, id inbox.ID, want string, timeout time.Duration) receiptState {
	t.Helper()
	var st receiptState
	testkit.Eventually(t, timeout, func() bool {
		st = stateOf(t, pool, id)
		return st.Status == want
	}, "receipt %s to be %s (last seen %s)", id, want, testkit.Lazy(func() string { return st.Status }))
	return st
}

// waitLeaseExpired waits until the leases of ids have expired by the
// server's clock, the one recovery reads: for tests whose point is what
// happens after an expiry.
func waitLeaseExpired(t testing.TB, pool *pgxpool.Pool, ids ...inbox.ID) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		return countRows(t, pool, "id = ANY($1) AND lease_expires_at <= now()", ids) == len(ids)
	}, "the leases of %v to expire", ids)
}

func startWorker(t testing.TB, w *inbox.Worker) {
	t.Helper()
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping worker: %v", err)
		}
	})
}

func acceptAll(t testing.TB, c *inbox.Client, msgs ...inbox.Message) []inbox.ID {
	t.Helper()
	ids := make([]inbox.ID, len(msgs))
	for i, m := range msgs {
		res, err := c.Accept(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ID
	}
	return ids
}

// logRecorder keeps the messages a worker logs, to assert on paths that leave
// no other trace (a refused commit writes nothing).
type logRecorder struct {
	next slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newLogRecorder(t testing.TB) (*slog.Logger, *logRecorder) {
	r := &logRecorder{next: testLogger(t).Handler(), mu: new(sync.Mutex), msgs: new([]string)}
	return slog.New(r), r
}

func (r *logRecorder) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r *logRecorder) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	*r.msgs = append(*r.msgs, rec.Message)
	r.mu.Unlock()
	return r.next.Handle(ctx, rec)
}

func (r *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.next = r.next.WithAttrs(as)
	return &c
}

func (r *logRecorder) WithGroup(name string) slog.Handler {
	c := *r
	c.next = r.next.WithGroup(name)
	return &c
}

func (r *logRecorder) logged(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(*r.msgs, func(m string) bool { return strings.Contains(m, substr) })
}

// count is how many logged messages contain substr.
func (r *logRecorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range *r.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
