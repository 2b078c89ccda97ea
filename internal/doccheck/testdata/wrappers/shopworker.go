package doc

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

func _(pool *pgxpool.Pool) error {
	//doc:block
	_ = worker
	return err
}
