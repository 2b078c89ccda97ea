// Package inboxtest helps test code built on pginbox against a real
// PostgreSQL database: process what is due synchronously, and wait for a
// receipt to reach a status.
//
//	w, _ := inbox.NewWorker(pool, reg, inbox.WorkerConfig{})
//	res, _ := client.Accept(ctx, msg)
//	inboxtest.Drain(t, w)
//	inboxtest.WaitForStatus(t, pool, res.ID, inbox.StatusCompleted, 0)
package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox"
)

// Drain runs w's handlers on every due receipt of its consumers, synchronously,
// until none is due, and returns how many it handled. Retries scheduled for
// later are not due yet. w must not be started. Any error fails the test.
func Drain(t testing.TB, w *inbox.Worker) int {
	t.Helper()
	n, err := w.Drain(t.Context())
	if err != nil {
		t.Fatalf("inboxtest.Drain: %v", err)
	}
	return n
}

// Querier reads receipts: *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Receipt is the state of a receipt as WaitForStatus last saw it.
type Receipt struct {
	Status    inbox.Status
	Attempts  int
	LastError string
}

// PollInterval is how often WaitForStatus reads the receipt.
const PollInterval = 10 * time.Millisecond

// WaitForStatus polls receipt id until its status is want and returns what it
// saw. It fails the test when timeout passes first (a timeout of 0 checks
// once), when the receipt does not exist, or when the receipt settles in
// another final status (COMPLETED or DEAD), which no worker would change.
func WaitForStatus(t testing.TB, q Querier, id inbox.ID, want inbox.Status, timeout time.Duration) Receipt {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r, err := read(t.Context(), q, id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			t.Fatalf("inboxtest.WaitForStatus: no receipt %s", id)
		case err != nil:
			t.Fatalf("inboxtest.WaitForStatus: reading receipt %s: %v", id, err)
		case r.Status == want:
			return r
		case r.Status == inbox.StatusCompleted || r.Status == inbox.StatusDead:
			t.Fatalf("inboxtest.WaitForStatus: receipt %s is %s, want %s%s", id, r.Status, want, r.describe())
		case !time.Now().Before(deadline):
			t.Fatalf("inboxtest.WaitForStatus: receipt %s still %s after %v, want %s%s", id, r.Status, timeout, want, r.describe())
		}
		time.Sleep(PollInterval)
	}
}

func read(ctx context.Context, q Querier, id inbox.ID) (Receipt, error) {
	var r Receipt
	var lastError *string
	err := q.QueryRow(ctx, "SELECT status, attempts, last_error FROM pginbox_receipts WHERE id = $1", id).
		Scan(&r.Status, &r.Attempts, &lastError)
	if lastError != nil {
		r.LastError = *lastError
	}
	return r, err
}

func (r Receipt) describe() string {
	s := fmt.Sprintf(" (attempts %d", r.Attempts)
	if r.LastError != "" {
		s += ", last error: " + r.LastError
	}
	return s + ")"
}
