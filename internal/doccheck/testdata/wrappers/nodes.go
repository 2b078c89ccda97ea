package doc

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context, coordinatorPool *pgxpool.Pool, registry *handler.Registry) error {
	//doc:block
	_, _ = client, worker
	return nil
}
