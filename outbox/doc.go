// Package outbox is pginbox's transactional outbox: a handler that must tell
// other services about its change emits events into its own transaction, so
// the business writes, the outgoing events and the inbox completion commit
// together or not at all. A Relay later publishes the events, at least once,
// each under a stable ID that the receiving service uses as its inbox message
// ID, so its inbox turns every redelivery into one effect.
//
//	func (Orders) HandleOrderPlaced(ctx context.Context, m *handler.Msg, p OrderPlaced) error {
//		if _, err := m.Tx.Exec(ctx, "INSERT INTO orders ...", p.OrderID); err != nil {
//			return err
//		}
//		_, err := EmitOrderConfirmed(ctx, m.Tx, OrderConfirmed{OrderID: p.OrderID}) // generated
//		return err
//	}
//
//	relay, err := outbox.NewRelay(pool, outbox.InboxPublisher{Client: billingInbox}, outbox.RelayConfig{})
//	err = relay.Run(ctx)
//
// # What is promised
//
//   - Emit writes in the caller's transaction: a rollback leaves no event, a
//     commit leaves one, PENDING.
//   - A relay publishes every committed event at least once. It marks an
//     event PUBLISHED only after its Publisher reported success, fenced by the
//     claim token: a relay whose lease expired marks nothing, and the event is
//     published again. A crash between publishing and marking also publishes
//     it again. Receivers deduplicate by the event ID (an inbox does so by
//     itself).
//   - A failed publish is retried with exponential backoff persisted in the
//     row; after RelayConfig.MaxAttempts attempts, or at once for an error
//     wrapped with handler.Permanent, the event is DEAD with its last error,
//     until an operator requeues it.
//   - Ordering, per ordering key: events of one key are published in emit
//     order, one batch of them in flight at a time, and a failing event holds
//     back the later events of its key until it is published or DEAD. Emits
//     for one key take a transaction-level lock on it, so emit order is the
//     order their transactions commit, and emitting transactions of one key
//     commit one after the other. A transaction emitting for several keys
//     locks them in emit order: emit them in a consistent order (sorted by
//     key, say) so that two such transactions cannot deadlock, which
//     PostgreSQL resolves by aborting one. Events without a key, and events of
//     different keys, have no order among them. A requeued DEAD event is
//     published after the events of its key that went out while it was DEAD.
//     The promise assumes Publishers return when their context ends
//     (RelayConfig.PublishTimeout, which is shorter than the lease).
//   - On Citus (pginbox's tables distributed by scope, docs/SCALE-OUT.md)
//     an ordering key orders the events of one scope: the key lock is taken
//     on the scope's node, so emits of one key in two scopes do not wait for
//     each other, and their events have no order among them. Emit there
//     sends one statement more (the transaction's scope, read on the
//     coordinator) and the relay claims scope by scope.
//
// # Context carried over
//
// When Emit runs in a handler (its ctx carries the handled message, see
// handler.MsgFromContext), the event's metadata gets the message's trace
// context (traceparent, tracestate), a causation ID (the handled message's
// ID) and, if the message had one, its correlation ID. Metadata the caller set
// wins. Middleware in ctx (WithEmitMiddleware) runs first: otelinbox's
// handler middleware puts the emit span's context there instead, a child of
// the handler's span.
//
// # Operations
//
// Admin reports stats, lists and shows events, requeues DEAD ones and purges
// published history; `inbox outbox` is the same on the command line. Relays
// delete PUBLISHED rows after RelayConfig.Retention themselves.
package outbox
