package doc

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context, appPool *pgxpool.Pool, tenantID, orderID string) error {
	//doc:block
	return err
}
