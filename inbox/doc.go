/*
Package inbox is pginbox's runtime: a transactional inbox on PostgreSQL. It
stores every delivery of an event durably and once (accept), applies it in the
same transaction as its completion (worker), and lets operators inspect and
repair what it stored (admin).

Your transport consumer (a webhook, RabbitMQ, Kafka, NATS, ...) hands each
delivery to [Client.Accept] and acknowledges it only when [ActionFor] says so.
A [Worker] later runs the handler registered for the receipt and commits the
handler's writes together with the receipt's completion. A redelivery of the
same event has the same [Identity] and is a duplicate, so each event has one
committed outcome. docs/GETTING-STARTED.md ("Your application, step by step")
builds a whole application; this page shows where the API starts.

# Accepting deliveries

[NewClient] takes a pgx pool. [Client.Accept] stores one [Message] and
[ActionFor] turns its error into what the transport must do:

	client, err := inbox.NewClient(pool, inbox.Config{})
	...
	res, err := client.Accept(ctx, inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant(tenantID), // from the authenticated delivery
			Source:    "orders-service",
			Consumer:  "orders.projection.v1",
			MessageID: eventID, // the same on every redelivery
		},
		EventType: "order.created", SchemaVersion: 1,
		Payload:   payload,
	})
	switch inbox.ActionFor(err) {
	case inbox.ActionAck: // stored, now or before (res.Outcome): acknowledge
	case inbox.ActionRetry: // maybe not stored: do not acknowledge, let it come again
	case inbox.ActionReject: // can never be stored: reject or dead-letter it
	}

[Client.AcceptTx] accepts inside a transaction of yours, [Client.AcceptBatch]
many messages with one insert and one commit, each with its own result. The packages under
transport/ do this for each broker.

# Processing receipts

A handler is a handler.Func registered in a handler.Registry under its
consumer, event type and schema version (`go generate` with cmd/inboxgen
writes typed ones from event declarations). It writes through the
message's transaction, m.Tx; the completion commits with those writes or
neither does. [NewWorker] runs the handlers of the consumers it owns:

	w, err := inbox.NewWorker(pool, registry, inbox.WorkerConfig{
		Consumers:   []string{"orders.projection.v1"},
		Concurrency: 4,
	})
	...
	err = w.Run(ctx) // until ctx ends, then a graceful stop

An error retries the receipt with backoff until its attempts are spent; an
error wrapped with handler.Permanent, or the last attempt, makes it DEAD, to
wait for an operator. [Worker.Subscribe] streams what the worker does;
[Worker.Drain] handles what is due now, for tests and one-shot jobs.

# Operating

[NewAdmin] returns the operator's API. Its views, [Admin.Operator] for every
scope, [Admin.ForTenant] and [Admin.Global] for one, read receipts
([AdminView.Get], [AdminView.List], [AdminView.Stats], [AdminView.DeadGroups])
and repair them ([AdminView.Requeue], [AdminView.Replay], [AdminView.Purge])
at an expected version, with an audit trail. The inbox command (cmd/inbox)
and package console are built on them.

# Testing

Package inbox/inboxtest gives every test its own real database with
pginbox's schema and the application's, drains a worker synchronously and
asserts on what the inbox stored (RequireStatus, RequireReceipt, ...). The
runnable examples on this page use it.

# Errors and configuration

Errors match sentinels with errors.Is and carry details for errors.As:
[ErrInvalid] (a [*ValidationError] naming the field and rule),
[ErrIdentityConflict], [ErrCommitUncertain], and the admin's [ErrNotFound],
[ErrVersionConflict], [ErrWrongState] and [ErrPayloadPurged]. A bad
configuration is a [*ConfigError] naming the field; every zero field means
its documented default.

# Related packages

  - handler: what a handler sees (the message, its transaction, Permanent).
  - outbox: events a handler emits in its transaction, published by a relay.
  - schema: the migrations (`inbox migrate up`).
  - console: a web console for the people on call.
  - otelinbox (a module of its own): OpenTelemetry tracing and metrics.
*/
package inbox
