package drillkit

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// What drill messages are.
const (
	Consumer  = "drill.ledger.v1"
	EventType = "drill.event"
	Source    = "drill"
	Tenant    = "tenant-drill"
)

// Message is drill message i.
func Message(i int) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant(Tenant),
			Source:    Source,
			Consumer:  Consumer,
			MessageID: MessageID(i),
		},
		EventType:     EventType,
		SchemaVersion: 1,
		Payload:       map[string]any{"n": i, "note": "failure drill"},
	}
}

// MessageID is the message ID of drill message i.
func MessageID(i int) string { return "drill-" + strconv.Itoa(i) }

// Execer runs a statement (a connection, a pool or a transaction).
type Execer interface {
	// Exec is pgx's Exec.
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateEffects creates the business table: one row per applied message and
// no unique key, so a message applied twice shows up as two rows.
func CreateEffects(ctx context.Context, db Execer) error {
	_, err := db.Exec(ctx, `CREATE TABLE drill_effects (
		message_id text NOT NULL,
		receipt_id uuid NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	if err != nil {
		return fmt.Errorf("drillkit: creating the business table: %w", err)
	}
	return nil
}

// Apply is the drills' handler: the business write, in the receipt's
// transaction.
func Apply(ctx context.Context, m *handler.Msg) error {
	_, err := m.Tx.Exec(ctx, "INSERT INTO drill_effects (message_id, receipt_id) VALUES ($1, $2)", m.MessageID, m.ReceiptID)
	return err
}

// Registry registers Apply for every drill message.
func Registry() *handler.Registry {
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: Consumer, EventType: EventType, SchemaVersion: 1}, Apply); err != nil {
		panic(err) // a fresh registry takes one handler
	}
	return reg
}
