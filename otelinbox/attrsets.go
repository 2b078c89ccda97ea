package otelinbox

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
)

// maxCachedSets bounds the attribute-set cache; past it, sets are built per
// call (names a sender made up must not grow memory without end).
const maxCachedSets = 10_000

// setKey identifies a metric attribute set: a consumer and event type with
// up to two more values (an outcome, an event kind, an error type).
type setKey struct {
	consumer, eventType string
	version             int
	a, b                string
}

// attrSets caches metric attribute sets: building one sorts and allocates,
// and the same few combinations repeat for every message.
type attrSets struct {
	m sync.Map // setKey -> attribute.Set
	n atomic.Int64
}

func (c *attrSets) get(k setKey, build func() []attribute.KeyValue) attribute.Set {
	if s, ok := c.m.Load(k); ok {
		return s.(attribute.Set)
	}
	s := attribute.NewSet(build()...)
	if c.n.Load() < maxCachedSets {
		if _, loaded := c.m.LoadOrStore(k, s); !loaded {
			c.n.Add(1)
		}
	}
	return s
}
