package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
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
	// The receipt's scope first (a read of every shard on Citus); then every
	// statement names it, so on Citus each runs on the scope's node alone.
	var kind, scope, consumer string
	var attempts, maxAttempts, version int32
	err := pool.QueryRow(ctx, `SELECT scope_kind, scope_id, consumer, attempts, max_attempts, version
		FROM pginbox_receipts WHERE id = $1`, id).Scan(&kind, &scope, &consumer, &attempts, &maxAttempts, &version)
	if err != nil {
		return fmt.Errorf("reading the receipt: %w", err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		const receipt = " WHERE id = $1 AND scope_kind = $2 AND scope_id = $3"
		const work = " WHERE receipt_id = $1 AND scope_kind = $2 AND scope_id = $3"
		queued := true
		err := tx.QueryRow(ctx, "SELECT attempts, version FROM pginbox_work"+work, id, kind, scope).Scan(&attempts, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			queued = false
		} else if err != nil {
			return err
		}
		switch status {
		case "":
		case string(inbox.StatusCompleted):
			// Settled: the queue row's counters move to the receipt.
			if _, err := tx.Exec(ctx, `UPDATE pginbox_receipts SET status = 'COMPLETED', attempts = $4, version = $5,
				completed_at = coalesce(completed_at, $6)`+receipt, id, kind, scope, attempts, version, time.Now()); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM pginbox_work"+work, id, kind, scope); err != nil {
				return err
			}
			queued = false
		default:
			settled := "PENDING"
			if status == string(inbox.StatusDead) {
				settled = "DEAD"
			}
			// A claimed receipt has a token and a lease. Both come from here:
			// Citus refuses a function that is not immutable in a routed
			// write's CASE or COALESCE.
			var token *inboxtype.ID
			var lease *time.Time
			if status == string(inbox.StatusProcessing) {
				t, l := inboxtype.New(), time.Now().Add(30*time.Second)
				token, lease = &t, &l
			}
			if queued {
				_, err = tx.Exec(ctx, `UPDATE pginbox_work SET status = $4,
					claim_token = CASE WHEN $5::uuid IS NOT NULL THEN coalesce(claim_token, $5) END,
					lease_expires_at = CASE WHEN $6::timestamptz IS NOT NULL THEN coalesce(lease_expires_at, $6) END`+work,
					id, kind, scope, status, token, lease)
			} else {
				_, err = tx.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, status, attempts, max_attempts, version, claim_token, lease_expires_at)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
					id, kind, scope, consumer, status, attempts, maxAttempts, version, token, lease)
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE pginbox_receipts SET status = $4, completed_at = NULL"+receipt, id, kind, scope, settled); err != nil {
				return err
			}
			queued = true
		}
		// The caller's expressions use $1 and $2 on: the scope goes after them.
		n := len(args) + 1
		own := fmt.Sprintf(" AND scope_kind = $%d AND scope_id = $%d", n+1, n+2)
		all := append(append([]any{id}, args...), kind, scope)
		if len(onQueue) > 0 && queued {
			if _, err := tx.Exec(ctx, "UPDATE pginbox_work SET "+strings.Join(onQueue, ", ")+" WHERE receipt_id = $1"+own, all...); err != nil {
				return err
			}
		}
		if len(onQueue) > 0 && !queued { // settled: the receipt keeps what it has of them
			for _, a := range onQueue {
				if col, _, _ := strings.Cut(a, " = "); settledColumns[col] {
					onReceipt = append(onReceipt, a)
				}
			}
		}
		if len(onReceipt) > 0 {
			if _, err := tx.Exec(ctx, "UPDATE pginbox_receipts SET "+strings.Join(onReceipt, ", ")+" WHERE id = $1"+own, all...); err != nil {
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
