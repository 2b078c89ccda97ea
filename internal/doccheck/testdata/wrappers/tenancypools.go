package doc

import (
	"context"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context, reg *handler.Registry) {
	//doc:block
	_, _, _, _ = client, worker, admin, err
}
