package conformance

import (
	"strconv"
	"sync"
	"testing"
)

// RedisServers starts the private Redis servers of the adapters on Redis
// (redisstream, bullmq) and remembers their addresses: each persists every
// write before it answers (appendonly yes, appendfsync always), as those
// adapters' READMEs ask, and evicts nothing (BullMQ needs noeviction).
type RedisServers struct {
	mu    sync.Mutex
	addrs map[string]bool
}

// Start starts one, for a driver's PrivateBroker.
func (r *RedisServers) Start(t *testing.T) Broker {
	p := StartProcess(t, "redis-server", "INBOX_TEST_REDIS_SERVER", "/usr/bin/redis-server", func(port int, dir string) []string {
		return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--maxmemory-policy", "noeviction"}
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs == nil {
		r.addrs = map[string]bool{}
	}
	r.addrs[p.Addr()] = true
	return p
}

// Started reports whether addr is one of the servers Start started (a
// publisher checks persistence there; the shared test Redis may not persist).
func (r *RedisServers) Started(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addrs[addr]
}
