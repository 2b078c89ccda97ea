// Package rabbitmq consumes a RabbitMQ queue into the inbox, acknowledging a
// delivery only after Accept stored it.
//
//   - ack: Accepted or Duplicate -> basic.ack.
//   - retry (storage failure, uncertain commit): wait, then basic.nack with
//     requeue. The wait grows with the delivery count. Retries are bounded
//     by Config.DeliveryLimit, counted by the broker: quorum queues stamp
//     every redelivery with an x-delivery-count header, which survives
//     consumer restarts. At the limit the delivery is dead-lettered with
//     reason "delivery_limit". (Classic queues have no such header: there
//     retries are unbounded, and the consumer logs a warning.)
//   - reject (invalid message, identity conflict, Decode error): the
//     delivery is republished to Config.DeadLetterExchange with the reason
//     in its headers, and acked once the broker confirmed that publish.
//     basic.reject cannot add headers, so the consumer publishes itself; a
//     dead letter the exchange routes nowhere is not acked (it is retried),
//     so nothing is dropped silently.
//
// Dead letters keep the original body and properties and add:
//
//	x-pginbox-reason       conflict | invalid | decode | delivery_limit
//	x-pginbox-error        the error text
//	x-pginbox-receipt      the stored receipt (conflict only)
//	x-pginbox-queue        the queue it was consumed from
//
// The consumer reconnects with backoff whenever the connection or channel
// goes away, and declares nothing unless Config.Setup does.
//
// Publisher is the other direction: an outbox.Publisher that sends a relay's
// events with publisher confirms, mandatory, the event ID as message-id;
// DecodeEvent maps its messages back for the Consumer.
package rabbitmq
