package driver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// citus is the driver of a Citus cluster with pginbox's tables distributed
// by scope_id and colocated: every statement for one scope carries it, so
// Citus routes it to the scope's node, and no statement locks rows on
// several shards (Citus refuses that), so claims and purges go scope by
// scope after a lock-free read of every shard. docs/SCALE-OUT.md says what
// runs where.
type citus struct{}

func (citus) Name() string { return "citus" }

// QueuePromotion keeps the server's choice of plan: Citus routes a
// statement by planning it for its parameters.
func (citus) QueuePromotion(ctx context.Context, b *pgx.Batch, s inboxtype.Scope, consumers, keys, locks []string) {
	queuePromotion(ctx, b, s, consumers, keys, locks)
}

// PurgeScopes lists the scopes with receipts to purge, reading every shard
// over one connection per worker node (pipetx.FanOut), as the claim's
// listing does.
func (citus) PurgeScopes(ctx context.Context, sys *pgxpool.Pool, cutoff time.Time) ([]db.ReceiptPurgeScopesRow, bool, error) {
	scopes, err := db.New(pipetx.FanOut{Pool: sys}).ReceiptPurgeScopes(ctx, cutoff)
	return scopes, false, err
}

func (citus) Outbox() Outbox { return citusOutbox{} }
