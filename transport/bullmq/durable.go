package bullmq

import "errors"

// ErrNotDurable means Redis does not persist what it acknowledges, so a job
// the relay added, and marked published, can vanish in a Redis restart. A
// job is durable when Redis runs with appendonly yes; with appendfsync
// everysec (Redis's default) a power loss can still drop the last second,
// appendfsync always drops nothing. RDB snapshots alone lose everything
// since the last snapshot. Turn AOF on (CONFIG SET appendonly yes, and in
// redis.conf), or set PublisherConfig.AllowNotDurable.
var ErrNotDurable = errors.New("pginbox/bullmq: Redis does not persist acknowledged writes")
