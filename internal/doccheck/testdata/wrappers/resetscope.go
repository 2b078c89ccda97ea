package doc

import (
	"context"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context) {
	//doc:block
	_, _ = appPool, err
}
