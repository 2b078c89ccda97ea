package redisstream

import (
	_ "github.com/redis/go-redis/v9"
	_ "github.com/pginbox/pginbox/inbox"
)
