// Package emitonly covers a producer that only emits: the generated file has
// no inbox side.
package emitonly

//outbox:event type=invoice.issued version=1 source=billing destination=shipping.v1
type InvoiceIssued struct {
	InvoiceID string `json:"invoiceId"`
	OrderID   string `json:"orderId"`
}
