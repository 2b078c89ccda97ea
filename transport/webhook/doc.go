// Package webhook accepts signed HTTP webhooks into the inbox.
//
// A Handler verifies each request before anything else reads it: the key ID
// header selects a secret and the tenant that owns it, the timestamp must be
// within Config.Tolerance of now, and the signature must be HMAC-SHA256 over
//
//	timestamp "\n" Idempotency-Key "\n" raw body
//
// (the Idempotency-Key header value, empty when absent) with that secret.
// Only then is the body decoded by Config.Decode and accepted. The response
// is sent after Accept returned, so a 2xx means the event is stored:
//
//	202 accepted      new receipt
//	200 duplicate     the event was already stored; nothing changed
//	400 bad request   Decode failed, or a required header is malformed
//	401 unauthorized  unknown key, stale or future timestamp, bad signature
//	405               not a POST
//	409 conflict      the message ID is stored with different content
//	413               body larger than Config.MaxBodyBytes
//	422 invalid       the message breaks an inbox rule; nothing was stored
//	503 + Retry-After storage failure or uncertain commit: send it again
//
// The tenant always comes from the verified key, never from the body. With
// Config.IdempotencyKey the Idempotency-Key header is required and becomes
// the message ID; the inbox itself is the idempotency memory, so a retry is
// deduplicated for as long as the receipt is retained, however long ago the
// first response was sent.
package webhook
