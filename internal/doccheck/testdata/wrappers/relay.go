package doc

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
)

func _(ctx context.Context, pool *pgxpool.Pool, billingInbox *inbox.Client) error {
	//doc:block
	return err
}
