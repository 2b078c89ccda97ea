package inbox

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// EventKind names what happened to a receipt in a worker.
type EventKind string

// Worker event kinds.
const (
	EventClaimed   EventKind = "claimed"    // claimed; attempt counted
	EventCompleted EventKind = "completed"  // the handler's transaction committed
	EventFailed    EventKind = "failed"     // the attempt failed and will be retried
	EventDead      EventKind = "dead"       // the attempt failed and the receipt is DEAD
	EventLeaseLost EventKind = "lease_lost" // another worker owns the receipt now
	EventRecovered EventKind = "recovered"  // an expired lease was returned by recovery
	EventReleased  EventKind = "released"   // handed back unstarted, attempt not spent
	EventAbandoned EventKind = "abandoned"  // a hung handler's slot was given up
	// EventRestricted: row-level security began to restrict the role of the
	// worker's SystemPool while it runs, so its claims find nothing. Err
	// says what to do; the event is about no receipt.
	EventRestricted EventKind = "restricted"
)

// Event is one thing that happened to a receipt in a worker (or, for
// EventRestricted, to the worker itself).
type Event struct {
	Kind          EventKind // what happened
	At            time.Time // when the worker saw it
	ReceiptID     ID        // the receipt; zero for EventRestricted
	Scope         Scope     // the receipt's scope
	Consumer      string    // the receipt's consumer
	EventType     string    // empty for EventRecovered
	SchemaVersion int       // the message's schema version; 0 for EventRecovered
	// Attempt is the attempt the event belongs to (0 for EventRecovered).
	Attempt int
	// Duration is how long the handler ran, for EventCompleted, EventFailed
	// and EventDead when a handler ran; zero otherwise.
	Duration time.Duration
	// Err is why the attempt failed (EventFailed, EventDead, EventAbandoned).
	Err error
	// RetryAt is when the receipt is due again (EventFailed).
	RetryAt time.Time
	// Metadata is the message's metadata (trace headers) when the handler
	// ran, for tracing integrations; nil otherwise.
	Metadata map[string]string
}

// DefaultSubscriptionBuffer is the events a subscription holds for a slow
// reader before it drops new ones.
const DefaultSubscriptionBuffer = 1000

// Subscription receives a worker's events. The worker never waits for a
// subscriber: when the buffer is full, new events are dropped and counted.
type Subscription struct {
	c       chan Event
	kinds   []EventKind // empty: every kind
	dropped atomic.Uint64
	hub     *eventHub
	once    sync.Once
}

// C returns the channel of events. It is closed by Close.
func (s *Subscription) C() <-chan Event { return s.c }

// Dropped returns how many events were dropped because the buffer was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription and closes C.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.hub.remove(s)
		close(s.c)
	})
}

// SubscribeConfig configures Worker.Subscribe.
type SubscribeConfig struct {
	// Kinds are the event kinds to receive. Defaults to every kind.
	Kinds []EventKind
	// Buffer is how many events wait for the reader before new ones are
	// dropped. Defaults to DefaultSubscriptionBuffer.
	Buffer int
}

// Subscribe returns a subscription to the worker's events. Subscribing costs
// the worker nothing while nobody subscribes, and never blocks it: a slow
// reader loses events (Subscription.Dropped counts them) instead.
func (w *Worker) Subscribe(cfg SubscribeConfig) *Subscription {
	buf := cfg.Buffer
	if buf <= 0 {
		buf = DefaultSubscriptionBuffer
	}
	s := &Subscription{c: make(chan Event, buf), kinds: slices.Clone(cfg.Kinds), hub: &w.events}
	w.events.add(s)
	return s
}

// eventHub fans events out to subscriptions.
type eventHub struct {
	mu   sync.RWMutex
	subs []*Subscription
	n    atomic.Int32 // len(subs), read without the lock on the hot path
}

func (h *eventHub) add(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = append(h.subs, s)
	h.n.Store(int32(len(h.subs)))
}

func (h *eventHub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = slices.DeleteFunc(h.subs, func(x *Subscription) bool { return x == s })
	h.n.Store(int32(len(h.subs)))
}

// active reports whether anyone listens, so callers can skip building events.
func (h *eventHub) active() bool { return h.n.Load() > 0 }

func (h *eventHub) publish(e Event) {
	if !h.active() {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.subs {
		if len(s.kinds) > 0 && !slices.Contains(s.kinds, e.Kind) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.dropped.Add(1)
		}
	}
}

// receiptEvent starts an event about a claimed receipt.
func receiptEvent(kind EventKind, r claimed) Event {
	return Event{
		Kind: kind, ReceiptID: r.ID, Scope: r.Identity.Scope, Consumer: r.Identity.Consumer,
		EventType: r.EventType, SchemaVersion: r.SchemaVersion, Attempt: r.Attempt,
	}
}
