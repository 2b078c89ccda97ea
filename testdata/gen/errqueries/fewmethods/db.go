// Package fewmethods has sqlc's New, but its DBTX lacks methods sqlc's
// pgx/v5 output declares.
package fewmethods

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

type DBTX interface {
	Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
}

func New(db DBTX) *Queries {
	return &Queries{db: db}
}

type Queries struct {
	db DBTX
}
