package drillkit

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// On Citus, the drills' messages spread over many tenants, and the business
// table is distributed by the tenant and colocated with pginbox's tables, so
// a handler's write and its receipt's completion commit on one node.

// CitusMessages returns the drill messages of tenants: message i goes to
// tenants[i % len(tenants)], with message ID prefix + i.
func CitusMessages(prefix string, tenants []string) func(i int) inbox.Message {
	return func(i int) inbox.Message {
		m := Message(i)
		m.Scope = inbox.Tenant(tenants[i%len(tenants)])
		m.MessageID = prefix + MessageID(i)
		return m
	}
}

// CreateCitusEffects creates the Citus business table: one row per applied
// message and no unique key, so a message applied twice shows up as two
// rows; distributed by the tenant (scope_id) and colocated with
// pginbox_receipts. REPLICA IDENTITY FULL stands in for the primary key it
// lacks: moving a shard online (logical replication) needs one on every
// table of the colocation group.
func CreateCitusEffects(ctx context.Context, db Execer) error {
	_, err := db.Exec(ctx, `
		CREATE TABLE drill_effects (
			scope_id text NOT NULL,
			message_id text NOT NULL,
			receipt_id uuid NOT NULL);
		ALTER TABLE drill_effects REPLICA IDENTITY FULL;
		SELECT create_distributed_table('drill_effects', 'scope_id', colocate_with => 'pginbox_receipts');`)
	if err != nil {
		return fmt.Errorf("drillkit: creating the Citus business table: %w", err)
	}
	return nil
}

// CitusApply is the drills' handler on Citus: the business write, routed to
// the tenant's node, in the receipt's transaction.
func CitusApply(ctx context.Context, m *handler.Msg) error {
	_, err := m.Tx.Exec(ctx, "INSERT INTO drill_effects (scope_id, message_id, receipt_id) VALUES ($1, $2, $3)",
		m.Scope.ID, m.MessageID, m.ReceiptID)
	return err
}

// CitusRegistry registers apply (CitusApply, or one that wraps it) for every
// drill message.
func CitusRegistry(apply handler.Func) *handler.Registry {
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: Consumer, EventType: EventType, SchemaVersion: 1}, apply); err != nil {
		panic(err) // a fresh registry takes one handler
	}
	return reg
}
