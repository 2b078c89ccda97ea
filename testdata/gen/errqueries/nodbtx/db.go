// Package nodbtx has sqlc's New and Queries, but New takes a struct, not an
// interface a pgx.Tx satisfies.
package nodbtx

type Conn struct{}

func New(db Conn) *Queries {
	return &Queries{db: db}
}

type Queries struct {
	db Conn
}
