package inboxtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// SetState forces receipt id into a state, as a test fixture: set is a SQL SET
// list over the columns of the pginbox_receipts_live view, such as
// "status = 'DEAD', attempts = 10, last_error = $2" ($1 is the receipt ID;
// args start at $2). The kit writes each column where pginbox keeps it: a
// settled receipt (COMPLETED) has no queue row, an active or DEAD one has.
// Columns only a queue row has (available_at, claim_token, lease_expires_at)
// are ignored for a COMPLETED receipt. Setting completed_at moves created_at
// back with it when needed, as no receipt completes before it is created. It
// bypasses every rule of the runtime (no audit, no fencing): use it to set up
// a test, never to change a receipt a test's worker is running.
func SetState(t testing.TB, pool *pgxpool.Pool, id inbox.ID, set string, args ...any) {
	t.Helper()
	if err := setState(t.Context(), pool, id, set, args...); err != nil {
		t.Fatalf("inboxtest.SetState(%s, %q): %v", id, set, err)
	}
}

// Columns kept on the retained receipt only, and on the queue row while there
// is one (otherwise on the receipt).
var (
	receiptColumns = map[string]bool{
		"created_at": true, "completed_at": true, "payload": true, "metadata": true,
		"payload_purged_at": true, "replay_of": true, "fingerprint": true,
		"event_type": true, "schema_version": true, "source": true, "message_id": true,
	}
	settledColumns = map[string]bool{
		"attempts": true, "max_attempts": true, "last_error": true, "version": true, "updated_at": true,
	}
	queueColumns = map[string]bool{
		"attempts": true, "max_attempts": true, "available_at": true, "claim_token": true,
		"lease_expires_at": true, "last_error": true, "version": true, "updated_at": true,
	}
)

func setState(ctx context.Context, pool *pgxpool.Pool, id inbox.ID, set string, args ...any) error {
	var status string
	var onReceipt, onQueue []string
	for _, a := range splitSet(set) {
		col, expr, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q is not column = expression", a)
		}
		col, expr = strings.TrimSpace(col), strings.TrimSpace(expr)
		switch {
		case col == "status":
			status = strings.Trim(expr, "'")
		case col == "completed_at":
			onReceipt = append(onReceipt, col+" = "+expr, "created_at = least(created_at, "+expr+")")
		case receiptColumns[col]:
			onReceipt = append(onReceipt, col+" = "+expr)
		case queueColumns[col]:
			onQueue = append(onQueue, col+" = "+expr)
		default:
			return fmt.Errorf("unknown column %q", col)
		}
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		all := append([]any{id}, args...)
		switch status {
		case "":
		case string(inbox.StatusCompleted):
			// Settled: the queue row's counters move to the receipt.
			if _, err := tx.Exec(ctx, `UPDATE pginbox_receipts r SET status = 'COMPLETED',
				attempts = coalesce(w.attempts, r.attempts), version = coalesce(w.version, r.version),
				completed_at = coalesce(r.completed_at, now())
				FROM (SELECT 1) one LEFT JOIN pginbox_work w ON w.receipt_id = $1 WHERE r.id = $1`, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM pginbox_work WHERE receipt_id = $1", id); err != nil {
				return err
			}
		default:
			settled := "PENDING"
			if status == string(inbox.StatusDead) {
				settled = "DEAD"
			}
			if _, err := tx.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, status, attempts, max_attempts, version, claim_token, lease_expires_at)
				SELECT id, scope_kind, scope_id, consumer, $2, attempts, max_attempts, version,
					CASE WHEN $2 = 'PROCESSING' THEN gen_random_uuid() END,
					CASE WHEN $2 = 'PROCESSING' THEN now() + interval '30 seconds' END
				FROM pginbox_receipts WHERE id = $1
				ON CONFLICT (receipt_id) DO UPDATE SET status = $2,
					claim_token = CASE WHEN $2 = 'PROCESSING' THEN coalesce(pginbox_work.claim_token, gen_random_uuid()) END,
					lease_expires_at = CASE WHEN $2 = 'PROCESSING' THEN coalesce(pginbox_work.lease_expires_at, now() + interval '30 seconds') END`,
				id, status); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE pginbox_receipts SET status = $2, completed_at = NULL WHERE id = $1", id, settled); err != nil {
				return err
			}
		}
		if len(onQueue) > 0 {
			tag, err := tx.Exec(ctx, "UPDATE pginbox_work SET "+strings.Join(onQueue, ", ")+" WHERE receipt_id = $1", all...)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 { // settled: the receipt keeps what it has of them
				for _, a := range onQueue {
					if col, _, _ := strings.Cut(a, " = "); settledColumns[col] {
						onReceipt = append(onReceipt, a)
					}
				}
			}
		}
		if len(onReceipt) > 0 {
			if _, err := tx.Exec(ctx, "UPDATE pginbox_receipts SET "+strings.Join(onReceipt, ", ")+" WHERE id = $1", all...); err != nil {
				return err
			}
		}
		return nil
	})
}

// splitSet splits a SET list at its top-level commas.
func splitSet(set string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, c := range set {
		switch {
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, set[start:i])
			start = i + 1
		}
	}
	return append(out, set[start:])
}
