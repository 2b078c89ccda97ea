// Package nats moves messages from a NATS JetStream consumer into a pginbox
// inbox: each message is accepted first and acknowledged only after the
// accept committed.
//
// What happens to a message is decided by inbox.ActionFor:
//
//   - ack (accepted, or a duplicate of a stored receipt): Ack.
//   - retry (storage failure, uncertain commit): NakWithDelay, with a delay
//     that doubles with every delivery. The consumer's DeliveryLimit bounds the
//     tries; when the server gives up it publishes a max-deliveries advisory,
//     and the Consumer moves that message to the dead-letter subject.
//   - reject (invalid message, identity conflict, a Decode error): publish to
//     the dead-letter subject with the reason in headers, then Term.
//
// The message ID is the Nats-Msg-Id header unless Config.Decode sets one
// (for example a stable event ID from the payload).
//
// Publisher is the other direction: an outbox.Publisher that sends a relay's
// events with Nats-Msg-Id = event ID, so the stream drops a re-publish;
// DecodeEvent maps its messages back for the Consumer.
package nats
