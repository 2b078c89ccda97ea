// Package redisaof is the start-up check of the transports on Redis
// (redisstream, bullmq) that Redis persists what it acknowledges. It takes
// the reply to CONFIG GET appendonly rather than a client, so the root
// module never imports a Redis client.
package redisaof

import "fmt"

// Check turns the reply to CONFIG GET appendonly (and its error) into the
// refusal a publisher returns, wrapping notDurable (the transport's
// ErrNotDurable): nil when appendonly is yes.
func Check(notDurable error, reply map[string]string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: could not read appendonly (CONFIG GET: %v); make sure AOF is on, then set PublisherConfig.AllowNotDurable", notDurable, err)
	}
	if reply["appendonly"] != "yes" {
		return fmt.Errorf("%w: appendonly is %q; run CONFIG SET appendonly yes (and set it in redis.conf), or set PublisherConfig.AllowNotDurable for a Redis whose loss you accept", notDurable, reply["appendonly"])
	}
	return nil
}
