// Package otelinbox traces and measures pginbox with OpenTelemetry, using
// only pginbox's extension points: accept middleware, handler middleware, the
// worker's event stream, the outbox's emit middleware and Publisher
// interface, and the admin API's stats.
//
// It is a module of its own (github.com/pginbox/pginbox/otelinbox), so an
// application that imports pginbox without it gets no OpenTelemetry
// requirement in its go.mod and builds no OpenTelemetry package: only
// applications that want telemetry pay for the API, the SDK and their
// updates. (`make check-deps` proves it with a scratch consumer; the only
// OpenTelemetry edges in that consumer's `go mod graph` are declared by
// goose's own go.mod for code pginbox never imports.)
//
// Wiring, with a Telemetry from New:
//
//	client, _ := inbox.NewClient(pool, inbox.Config{
//		AcceptMiddleware:      []inbox.AcceptMiddleware{tel.AcceptMiddleware()},
//		AcceptBatchMiddleware: []inbox.AcceptBatchMiddleware{tel.AcceptBatchMiddleware()},
//	})
//	worker, _ := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
//		HandlerMiddleware: []handler.Middleware{tel.HandlerMiddleware()},
//	})
//	relay, _ := outbox.NewRelay(pool, tel.Publisher(publisher), outbox.RelayConfig{})
//	events, _ := tel.ObserveWorker(worker) // metrics and settle spans from the event stream
//	defer events.Close()
//	backlog, _ := tel.ObserveBacklog(pool, "orders.projection.v1") // backlog gauges from one query
//	defer backlog.Close()
//
// Traces. Every accept is a producer span "accept <consumer>" whose context
// is written into the message's metadata (W3C traceparent and tracestate), so
// the handler's consumer span "process <consumer>" continues that trace (or
// links to it, with Config.Trace = TraceLink). Each attempt's outcome is a
// span "complete", "retry" or "dead" followed by the consumer, from the event
// stream. An outbox.Emit in the handler is a producer span "emit
// <destination>" under the handler's span, and the event carries its
// context, so the service that receives it continues the trace; the relay's
// "publish <destination>" span (Publisher) starts a trace of its own per
// batch, linked to each event's emit span. Claims are not spans: one claim
// statement takes receipts of many traces and reads none of their metadata;
// they are counted instead.
//
// Errors. error.type is a classification, not the text: "permanent",
// pginbox's sentinels ("lease_lost", "not_migrated", ...), "sqlstate_" and
// the code of a PostgreSQL error, the Go type of an application's own error
// type, or a fallback per operation ("handler_error", "storage",
// "publish_error").
//
// Privacy. Spans and metrics never carry the tenant ID, the message ID or the
// payload unless Config.RecordTenantID, RecordMessageID or RecordPayload say
// so. Accept, emit and publish errors are described by their kind
// (error.type), never by their text, since a conflict's text names the
// identity. A handler's error text is recorded on its span: keep tenant data
// out of it.
package otelinbox
