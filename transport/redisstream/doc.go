// Package redisstream moves the entries of a Redis stream into a pginbox
// inbox through a consumer group: each entry is accepted first and
// acknowledged (XACK) only after the accept committed.
//
// What happens to an entry is decided by inbox.ActionFor:
//
//   - ack (accepted, or a duplicate of a stored receipt): XACK.
//   - retry (storage failure, uncertain commit): nothing. The entry stays
//     pending; after Config.ClaimIdle a Consumer takes it over with
//     XAUTOCLAIM and tries again. When its delivery count (from XPENDING)
//     passes Config.DeliveryLimit it is dead-lettered instead.
//   - reject (invalid message, identity conflict, a Decode error): XADD to
//     the dead-letter stream with the reason, and XACK, in one MULTI.
//
// The message ID is the entry's Config.IDField field ("message_id") unless
// Config.Decode sets one. Entry IDs are not used: a producer that retries
// XADD creates a new entry with a new ID.
//
// Publisher is the other direction: an outbox.Publisher that XADDs a relay's
// events with the event ID in message_id (Redis does not deduplicate; the
// receiving inbox does); DecodeEvent maps its entries back for the Consumer.
package redisstream
