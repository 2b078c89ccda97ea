package redisbase

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Check is the rules every Redis consumer's Config starts with: a client, a
// scope, a Decode (of what, "an entry"), and a DeliveryLimit and Block that
// allow a delivery and a wait.
func Check(rdb redis.UniversalClient, scope inbox.Scope, decoder bool, what string, deliveryLimit int64, block time.Duration) cfgerr.Check {
	return cfgerr.All(
		cfgerr.If(rdb == nil, `Config.Redis is nil: pass a client, e.g. redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})`),
		cfgerr.Scope("Config.Scope", scope),
		cfgerr.If(!decoder, "Config.Decode is required: map %s to an inbox.Message", what),
		cfgerr.AtLeast("Config.DeliveryLimit", deliveryLimit, 1),
		cfgerr.If(block < time.Millisecond, "Config.Block is %v: it must be at least 1ms", block),
	)
}

// ClientCheck refuses a PublisherConfig without a client.
func ClientCheck(rdb redis.UniversalClient) cfgerr.Check {
	return cfgerr.If(rdb == nil, "PublisherConfig.Redis is nil: pass a client, e.g. redis.NewClient(...)")
}
