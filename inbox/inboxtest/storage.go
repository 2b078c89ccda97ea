package inboxtest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox"
)

// Every read and write the kit makes of pginbox's tables is in this file, so
// a change to the storage layout touches the kit in one place. Reads go
// through the pginbox_receipts_live view: each receipt with its live state.

// Querier reads receipts: *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type Querier interface {
	// QueryRow is pgx's QueryRow.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// selectReceipts returns the receipts of the subquery `r` as one JSON array,
// so a Querier needs nothing but QueryRow.
const selectReceipts = `
SELECT coalesce(json_agg(json_build_object(
    'id', r.id, 'scope_kind', r.scope_kind, 'scope_id', r.scope_id,
    'source', r.source, 'consumer', r.consumer, 'message_id', r.message_id,
    'event_type', r.event_type, 'schema_version', r.schema_version,
    'status', r.status, 'attempts', r.attempts, 'last_error', coalesce(r.last_error, '')
) ORDER BY r.id), '[]')
FROM `

const (
	receiptByID = selectReceipts + `pginbox_receipts_live r WHERE r.id = $1`

	// A replay shares its original's identity; the original is the receipt
	// of the delivery.
	receiptByIdentity = selectReceipts + `pginbox_receipts_live r
WHERE r.scope_kind = $1 AND r.scope_id = $2 AND r.source = $3 AND r.consumer = $4
  AND r.message_id = $5 AND r.replay_of IS NULL`

	// Receipts of the same message ID under any scope, source or consumer:
	// what a test most likely meant when its identity found nothing.
	receiptsByMessageID = selectReceipts + `(
    SELECT * FROM pginbox_receipts_live
    WHERE message_id = $1 AND replay_of IS NULL
    ORDER BY id LIMIT $2) r`
)

// readByID returns receipt id, or ok false when there is none.
func readByID(ctx context.Context, q Querier, id inbox.ID) (r Receipt, ok bool, err error) {
	rs, err := readReceipts(ctx, q, receiptByID, id)
	if err != nil || len(rs) == 0 {
		return Receipt{}, false, err
	}
	return rs[0], true, nil
}

// readByIdentity returns the receipt of identity's delivery (not a replay),
// or ok false when there is none.
func readByIdentity(ctx context.Context, q Querier, id inbox.Identity) (r Receipt, ok bool, err error) {
	rs, err := readReceipts(ctx, q, receiptByIdentity, id.Scope.Kind, id.Scope.ID, id.Source, id.Consumer, id.MessageID)
	if err != nil || len(rs) == 0 {
		return Receipt{}, false, err
	}
	return rs[0], true, nil
}

// readByMessageID returns up to limit receipts with this message ID.
func readByMessageID(ctx context.Context, q Querier, messageID string, limit int) ([]Receipt, error) {
	return readReceipts(ctx, q, receiptsByMessageID, messageID, limit)
}

func readReceipts(ctx context.Context, q Querier, sql string, args ...any) ([]Receipt, error) {
	var raw []byte
	if err := q.QueryRow(ctx, sql, args...).Scan(&raw); err != nil {
		return nil, fmt.Errorf("reading receipts: %w", err)
	}
	var rows []struct {
		ID            inbox.ID        `json:"id"`
		ScopeKind     inbox.ScopeKind `json:"scope_kind"`
		ScopeID       string          `json:"scope_id"`
		Source        string          `json:"source"`
		Consumer      string          `json:"consumer"`
		MessageID     string          `json:"message_id"`
		EventType     string          `json:"event_type"`
		SchemaVersion int             `json:"schema_version"`
		Status        inbox.Status    `json:"status"`
		Attempts      int             `json:"attempts"`
		LastError     string          `json:"last_error"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("decoding receipts: %w", err)
	}
	out := make([]Receipt, len(rows))
	for i, r := range rows {
		out[i] = Receipt{
			ID: r.ID,
			Identity: inbox.Identity{
				Scope:     inbox.Scope{Kind: r.ScopeKind, ID: r.ScopeID},
				Source:    r.Source,
				Consumer:  r.Consumer,
				MessageID: r.MessageID,
			},
			EventType:     r.EventType,
			SchemaVersion: r.SchemaVersion,
			Status:        r.Status,
			Attempts:      r.Attempts,
			LastError:     r.LastError,
		}
	}
	return out, nil
}

// eventsByReceipt returns the outbox events a receipt's handler emitted and
// committed, in emit order (pginbox_outbox.receipt_id links them).
const eventsByReceipt = `
SELECT coalesce(json_agg(json_build_object(
    'id', o.id, 'event_type', o.event_type, 'schema_version', o.schema_version,
    'source', o.source, 'destination', o.destination, 'ordering_key', o.ordering_key,
    'payload', o.payload, 'metadata', o.metadata,
    'scope_kind', o.scope_kind, 'scope_id', o.scope_id, 'status', o.status
) ORDER BY o.seq), '[]')
FROM pginbox_outbox o
WHERE o.receipt_id = $1`

func readEmitted(ctx context.Context, q Querier, receipt inbox.ID) ([]EmittedEvent, error) {
	var raw []byte
	if err := q.QueryRow(ctx, eventsByReceipt, receipt).Scan(&raw); err != nil {
		return nil, fmt.Errorf("reading outbox events: %w", err)
	}
	var rows []struct {
		ID            inbox.ID          `json:"id"`
		EventType     string            `json:"event_type"`
		SchemaVersion int               `json:"schema_version"`
		Source        string            `json:"source"`
		Destination   string            `json:"destination"`
		OrderingKey   string            `json:"ordering_key"`
		Payload       json.RawMessage   `json:"payload"`
		Metadata      map[string]string `json:"metadata"`
		ScopeKind     inbox.ScopeKind   `json:"scope_kind"`
		ScopeID       string            `json:"scope_id"`
		Status        string            `json:"status"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("decoding outbox events: %w", err)
	}
	out := make([]EmittedEvent, len(rows))
	for i, r := range rows {
		out[i] = EmittedEvent{
			ID: r.ID, Type: r.EventType, SchemaVersion: r.SchemaVersion,
			Source: r.Source, Destination: r.Destination, OrderingKey: r.OrderingKey,
			Payload: r.Payload, Metadata: r.Metadata,
			Scope: inbox.Scope{Kind: r.ScopeKind, ID: r.ScopeID}, Status: r.Status,
		}
	}
	return out, nil
}
