// Package queries covers -queries: handler methods receive *appdb.Queries.
package queries

//go:generate go run github.com/pginbox/pginbox/cmd/inboxgen -queries github.com/pginbox/pginbox/testdata/gen/queries/appdb

//inbox:event type=invoice.paid version=1 consumers=ledger.v1
type InvoicePaid struct {
	InvoiceID string `json:"invoiceId"`
	Cents     int64  `json:"cents"`
}
