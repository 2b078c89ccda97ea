// Package sqs moves messages between pginbox and SQS-compatible queues
// (Amazon SQS and servers speaking its JSON protocol), on the AWS SDK for Go
// v2.
//
// A Consumer receives messages from a queue and accepts each into the inbox
// before it deletes it: a message is deleted only after its accept committed
// (or found a duplicate). While an accept is slow, the Consumer extends the
// message's visibility timeout so that no other receiver gets it. A message
// the database could not take is made visible again after a backoff and
// redelivered; a message the inbox rejects is sent to a dead-letter queue
// and deleted, or, without one, left to the queue's redrive policy.
//
// A Publisher sends outbox events to queues for an outbox.Relay; on FIFO
// queues the event ID is the MessageDeduplicationId and the ordering key the
// MessageGroupId.
package sqs
