// Package notsqlc has a New, but not sqlc's.
package notsqlc

type Queries struct{}

func New() *Queries { return &Queries{} }
