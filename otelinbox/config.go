package otelinbox

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/inbox"
)

// TraceMode says how a handler's span relates to the trace context found in
// its message's metadata.
type TraceMode string

const (
	// TraceParent makes the handler span a child of the accept (or producer)
	// span: one trace runs from the producer through accept to the handler.
	TraceParent TraceMode = "parent"
	// TraceLink starts a new trace per handler call, linked to the producer's
	// span: for handlers that run long after the request that caused them.
	TraceLink TraceMode = "link"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultTraceMode       = TraceParent
	DefaultBacklogInterval = 10 * time.Second
	// DefaultMaxPayloadAttribute is how many bytes of the payload
	// RecordPayload puts on a span.
	DefaultMaxPayloadAttribute = 4096
)

// Limits of Config fields.
const (
	MinBacklogInterval = 100 * time.Millisecond
	MaxEventBuffer     = 1_000_000
)

// Config configures a Telemetry. Zero values mean the documented defaults;
// New rejects bad values with an error naming the field.
type Config struct {
	// TracerProvider creates the spans. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// MeterProvider creates the instruments. Defaults to
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// Propagator writes trace context into message metadata at accept and
	// reads it back in the handler. Defaults to W3C trace context
	// (traceparent and tracestate).
	Propagator propagation.TextMapPropagator

	// Trace says whether a handler span is a child of the trace context in
	// its message's metadata (TraceParent) or the root of a new trace linked
	// to it (TraceLink). Defaults to DefaultTraceMode.
	Trace TraceMode

	// RecordTenantID adds the tenant ID (pginbox.tenant.id) to spans.
	// Defaults to false: tenant IDs often identify a customer.
	RecordTenantID bool

	// RecordMessageID adds messaging.message.id to spans. Defaults to false:
	// a producer's event ID may identify a tenant's data.
	RecordMessageID bool

	// RecordPayload adds the canonical payload (pginbox.payload), cut at
	// MaxPayloadAttribute bytes, to handler spans. Defaults to false.
	RecordPayload bool

	// MaxPayloadAttribute bounds the payload RecordPayload records. Defaults
	// to DefaultMaxPayloadAttribute.
	MaxPayloadAttribute int

	// EventBuffer is how many worker events ObserveWorker's subscription
	// holds before it drops new ones (counted in
	// pginbox.worker.events.dropped). Defaults to
	// inbox.DefaultSubscriptionBuffer.
	EventBuffer int

	// BacklogInterval is the least time between two backlog queries: gauges
	// collected more often report the last result. Defaults to
	// DefaultBacklogInterval; at least MinBacklogInterval.
	BacklogInterval time.Duration

	// Logger receives backlog query failures. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) validate() error {
	switch {
	case c.Trace != "" && c.Trace != TraceParent && c.Trace != TraceLink:
		return configErr("Trace", fmt.Sprintf("%q: want otelinbox.TraceParent or otelinbox.TraceLink", c.Trace))
	case c.MaxPayloadAttribute < 0:
		return configErr("MaxPayloadAttribute", fmt.Sprintf("%d: must not be negative (0 means %d)", c.MaxPayloadAttribute, DefaultMaxPayloadAttribute))
	case c.EventBuffer < 0 || c.EventBuffer > MaxEventBuffer:
		return configErr("EventBuffer", fmt.Sprintf("%d: must be between 1 and %d (or 0 for %d)", c.EventBuffer, MaxEventBuffer, inbox.DefaultSubscriptionBuffer))
	case c.BacklogInterval != 0 && c.BacklogInterval < MinBacklogInterval:
		return configErr("BacklogInterval", fmt.Sprintf("%s: must be at least %s (or 0 for %s): every interval costs a query", c.BacklogInterval, MinBacklogInterval, DefaultBacklogInterval))
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	if c.Trace == "" {
		c.Trace = DefaultTraceMode
	}
	if c.MaxPayloadAttribute == 0 {
		c.MaxPayloadAttribute = DefaultMaxPayloadAttribute
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = inbox.DefaultSubscriptionBuffer
	}
	if c.BacklogInterval == 0 {
		c.BacklogInterval = DefaultBacklogInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// configErr is an *inbox.ConfigError, so errors.Is(err, inbox.ErrInvalidConfig)
// holds for otelinbox's configuration too.
func configErr(field, detail string) error {
	return &inbox.ConfigError{Field: "otelinbox.Config." + field, Detail: detail}
}
