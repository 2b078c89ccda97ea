// Package kafka consumes Kafka topics into the inbox, committing a
// partition's offset only past records the inbox has stored.
//
// Each poll is accepted per partition with one AcceptBatch, and then:
//
//   - ack: Accepted and Duplicate records advance the partition's offset.
//   - reject: an invalid or conflicting record, or one Decode refused, is
//     produced to Config.DeadLetterTopic with the reason in its headers;
//     once that produce succeeded the offset may pass it.
//   - retry: when the batch fails (storage failure, uncertain commit), its
//     records are accepted again one at a time, up to the first that fails
//     alone; the partition's offset stops before that record (or one whose
//     dead letter cannot be produced), the consumer rewinds to it and
//     re-reads it after a backoff. Records before it are still committed.
//     A record that fails alone Config.DeliveryLimit times is dead-lettered
//     instead (reason delivery_limit), so that it does not hold its
//     partition forever. Kafka keeps no delivery count: the Consumer counts
//     in memory, so a restart or a rebalance starts the count again.
//
// Offsets are committed after every poll, synchronously, while rebalances
// are held back (BlockRebalanceOnPoll): a partition is never revoked in the
// middle of a batch, and OnPartitionsRevoked commits only offsets whose
// records were accepted. A consumer killed between AcceptBatch and the
// commit re-reads those records on restart, and they are Duplicates.
//
// Dead letters keep key, value and headers and add:
//
//	pginbox-reason     conflict | invalid | decode | delivery_limit
//	pginbox-error      the error text
//	pginbox-receipt    the stored receipt (conflict only)
//	pginbox-topic, pginbox-partition, pginbox-offset   where it came from
//
// franz-go reconnects to brokers by itself; Run returns only when ctx ends.
//
// Publisher is the other direction: an outbox.Publisher on the idempotent
// producer (acks=all), keyed by ordering key, the event ID in a header;
// DecodeEvent maps its records back for the Consumer.
package kafka
