package doc

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context, pool *pgxpool.Pool) {
	//doc:block
	_, _ = client, res
}
