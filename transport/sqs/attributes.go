package sqs

// Message attributes the Publisher sets, and the Consumer reads (message ID)
// and writes on dead letters (the rest). SQS allows ten attributes a
// message, so the metadata travels as one JSON object.
const (
	AttrMessageID     = "pginbox.message_id" // the event ID; the inbox message ID
	AttrEventType     = "pginbox.event_type"
	AttrSchemaVersion = "pginbox.schema_version" // Number
	AttrSource        = "pginbox.source"
	AttrOrderingKey   = "pginbox.ordering_key" // absent when the event has none
	AttrMetadata      = "pginbox.metadata"     // JSON object of strings; absent when empty

	// On dead letters, besides the original message's attributes.
	AttrReason  = "pginbox.dead.reason"  // ReasonDecode, ReasonInvalid, ReasonConflict
	AttrError   = "pginbox.dead.error"   // the error text
	AttrReceipt = "pginbox.dead.receipt" // the conflicting receipt's ID, for ReasonConflict
	// AttrOrigin is a JSON object: the queue URL the message came from
	// ("queue"), its SQS MessageId there ("message_id") and its
	// ApproximateReceiveCount ("receives").
	AttrOrigin = "pginbox.dead.origin"
)
