package errqueries

//go:generate go run github.com/pginbox/pginbox/cmd/inboxgen -queries github.com/pginbox/pginbox/testdata/gen/errqueries/notsqlc

//inbox:event type=a version=1 consumers=b
type A struct{}
