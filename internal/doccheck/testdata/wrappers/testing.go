package doc

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func migrateShop(ctx context.Context, dsn string) error { return nil }

func newShop(t *testing.T, pool *pgxpool.Pool) (*inbox.Client, *inbox.Worker) { return nil, nil }

func acceptOrderCreated(t *testing.T, client *inbox.Client) inbox.Identity { return inbox.Identity{} }

//doc:block
