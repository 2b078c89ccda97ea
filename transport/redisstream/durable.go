package redisstream

import "errors"

// ErrNotDurable means Redis does not persist what it acknowledges, so an
// event the relay marked published can vanish in a Redis restart. An entry
// is durable ("delivered") when Redis runs with appendonly yes; with
// appendfsync everysec (Redis's default) a power loss can still drop the
// last second, appendfsync always drops nothing. RDB snapshots alone lose
// everything since the last snapshot. Turn AOF on (CONFIG SET appendonly
// yes, and in redis.conf), or set PublisherConfig.AllowNotDurable.
var ErrNotDurable = errors.New("pginbox/redisstream: Redis does not persist acknowledged entries")
