// Package mqtt moves MQTT v5 messages (QoS 1) into a pginbox inbox: each
// message is accepted first and acknowledged (PUBACK, sent manually) only
// after the accept committed.
//
// What happens to a message is decided by inbox.ActionFor:
//
//   - ack (accepted, or a duplicate of a stored receipt): PUBACK.
//   - retry (storage failure, uncertain commit): no PUBACK. MQTT has no
//     negative acknowledgement: the broker sends an unacknowledged QoS 1
//     message again only when the session reconnects. So after
//     Config.RetryDelay the Consumer drops its connection and reconnects to
//     the same persistent session, and the broker redelivers every
//     unacknowledged message. A message whose accept fails
//     Config.DeliveryLimit times is dead-lettered instead (reason
//     delivery_limit), so that it does not hold back the messages after it
//     forever (acknowledgements go out in arrival order). MQTT keeps no
//     delivery count: the Consumer counts in memory, so a restart starts
//     the count again.
//   - reject (invalid message, identity conflict, a Decode error): publish
//     to the dead-letter topic (QoS 1) with the reason in user properties,
//     then PUBACK.
//
// The message ID is the "message-id" user property (Config.IDProperty)
// unless Config.Decode sets one.
//
// Publisher is an outbox.Publisher for the relay: it publishes each event
// at QoS 1 to the topic its Destination names, with the event ID in the
// "message-id" user property, and reports it delivered only after the
// broker's PUBACK; DecodeEvent is the matching Config.Decode. Whether a
// PUBACKed message survives a broker restart depends on the broker's
// persistence settings and on the subscribers' persistent sessions, which
// a client cannot see: see the README.
package mqtt
