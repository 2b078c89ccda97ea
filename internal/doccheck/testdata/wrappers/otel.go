package doc

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
	"github.com/pginbox/pginbox/outbox"
)

func _(pool *pgxpool.Pool, reg *handler.Registry, publisher outbox.Publisher) {
	//doc:block
	_, _, _ = client, relay, err
}
