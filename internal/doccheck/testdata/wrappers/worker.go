package doc

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

type OrderCreated struct {
	OrderID string `json:"orderId"`
}

func _(pool *pgxpool.Pool) error {
	//doc:block
}
