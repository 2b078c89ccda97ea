package inbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
)

type billingConsumer struct{}

func (billingConsumer) Name() string { return "billing.v1" }

type paid struct {
	InvoiceID string `json:"invoiceId"`
}

func (p paid) Validate() error {
	if p.InvoiceID == "" {
		return errors.New("invoiceId is required")
	}
	return nil
}

type refunded struct {
	InvoiceID string `json:"invoiceId"`
}

func (p *refunded) Validate() error {
	if p.InvoiceID == "" {
		return errors.New("invoiceId is required")
	}
	return nil
}

type noValidate struct {
	N int `json:"n"`
}

func TestNewEventMessage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	d := inbox.Delivery{Scope: inbox.Tenant("acme"), Source: "billing-service", MessageID: "evt-1", Metadata: map[string]string{"traceparent": "x"}}

	msg, err := inbox.NewEventMessage(billingConsumer{}, "invoice.paid", 2, d, paid{InvoiceID: "i-1"})
	is.NoErr(err)
	is.Equal(msg.Identity, inbox.Identity{Scope: inbox.Tenant("acme"), Source: "billing-service", Consumer: "billing.v1", MessageID: "evt-1"})
	is.Equal(msg.EventType, "invoice.paid")
	is.Equal(msg.SchemaVersion, 2)
	is.Equal(msg.Payload, paid{InvoiceID: "i-1"})
	is.Equal(msg.Metadata, d.Metadata)

	_, err = inbox.NewEventMessage(billingConsumer{}, "x", 1, d, noValidate{N: 1})
	is.NoErr(err)
}

// Validate runs whatever its receiver and whether the payload is passed as a
// value or a pointer.
func TestNewEventMessageRunsValidate(t *testing.T) {
	t.Parallel()
	d := inbox.Delivery{Scope: inbox.Global(), Source: "s", MessageID: "m"}
	cases := map[string]func() (inbox.Message, error){
		"value receiver, value":     func() (inbox.Message, error) { return inbox.NewEventMessage(billingConsumer{}, "x", 1, d, paid{}) },
		"value receiver, pointer":   func() (inbox.Message, error) { return inbox.NewEventMessage(billingConsumer{}, "x", 1, d, &paid{}) },
		"pointer receiver, value":   func() (inbox.Message, error) { return inbox.NewEventMessage(billingConsumer{}, "x", 1, d, refunded{}) },
		"pointer receiver, pointer": func() (inbox.Message, error) { return inbox.NewEventMessage(billingConsumer{}, "x", 1, d, &refunded{}) },
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			_, err := build()
			var verr *inbox.ValidationError
			is.True(errors.As(err, &verr))
			is.Equal(verr.Field, "payload")
			is.Equal(verr.Rule, inbox.RuleValidate)
			is.Equal(verr.Detail, "invoiceId is required")
			is.True(errors.Is(err, inbox.ErrInvalid))
			is.Equal(inbox.ActionFor(err), inbox.ActionReject)
		})
	}
}

func TestNewEventMessageNilConsumer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, err := inbox.NewEventMessage(nil, "x", 1, inbox.Delivery{}, paid{InvoiceID: "i-1"})
	var verr *inbox.ValidationError
	is.True(errors.As(err, &verr))
	is.Equal(verr.Field, "consumer")
	is.Equal(verr.Rule, inbox.RuleRequired)
	is.Equal(err.Error(), "pginbox: invalid consumer (required): to is nil: pass one of the generated consumer values")
}

// A built message is the same message as one written out by hand: same
// identity, same fingerprint.
func TestNewEventMessageAccepts(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	client := newClient(t, pool, inbox.Config{})

	d := inbox.Delivery{Scope: inbox.Tenant("acme"), Source: "billing-service", MessageID: "evt-1"}
	msg, err := inbox.NewEventMessage(billingConsumer{}, "invoice.paid", 1, d, paid{InvoiceID: "i-1"})
	is.NoErr(err)
	res, err := client.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)

	res, err = client.Accept(ctx, inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("acme"), Source: "billing-service", Consumer: "billing.v1", MessageID: "evt-1"},
		EventType:     "invoice.paid",
		SchemaVersion: 1,
		Payload:       []byte(`{"invoiceId":"i-1"}`),
	})
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)
}

// The identity rules live in inboxtype, where the code generator reads them
// too; inbox reports them under its own Rule names and limit.
func TestIdentityRulesMatchInbox(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.Equal(inbox.MaxIdentityBytes, inboxtype.MaxIdentityBytes)
	is.Equal(inbox.Rule(inboxtype.IdentityRequired), inbox.RuleRequired)
	is.Equal(inbox.Rule(inboxtype.IdentityTooLong), inbox.RuleTooLong)
	is.Equal(inbox.Rule(inboxtype.IdentityInvalidUTF8), inbox.RuleInvalidUTF8)
	is.Equal(inbox.Rule(inboxtype.IdentityControlChar), inbox.RuleControlChar)
}
