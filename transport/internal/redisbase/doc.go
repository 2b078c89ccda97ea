// Package redisbase is what the transports on Redis (redisstream, bullmq)
// share: the start-up check that Redis persists what it acknowledges, the
// publishers' pipelined writes, the consumers' retry loop and the accept
// that settles what they took, and the checks of their configs.
//
// It is a module of its own, beside the adapters, so that the root module
// (pginbox) never requires a Redis client; the internal path keeps it out
// of applications' imports.
package redisbase
