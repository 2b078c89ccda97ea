// Package conformance is the behaviour every transport adapter owes, written
// once: a consumer suite (RunConsumer) and a publisher suite (RunPublisher)
// that run against the adapter's real broker. Each adapter supplies a small
// driver that knows how to put a message on its broker, start its consumer or
// publisher, and read what the broker holds; the suite does the rest. A case
// that cannot apply to a broker is skipped by the driver's Skip with a
// stated reason, never silently.
//
// An adapter wires the suites in its test package with a type implementing
// ConsumerDriver and PublisherDriver (see transport/redisstream, nats and
// rabbitmq's conformance_test.go):
//
//	func TestConsumerConformance(t *testing.T)  { conformance.RunConsumer(t, driver{}) }
//	func TestPublisherConformance(t *testing.T) { conformance.RunPublisher(t, driver{}) }
//
// The shared broker comes from brokertest (skip outside CI, fail with
// CI=true); the restart cases start a broker process of their own on a free
// port (StartProcess), never the shared one.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// What a driver's decoder puts in every inbox message, so that a
// drill.Ledger applies them.
const (
	Tenant        = "tenant-a"
	Source        = "conformance"
	Consumer      = "orders.projection.v1"
	EventType     = drill.EventType
	SchemaVersion = drill.SchemaVersion
)

// Case names a suite case, for Skip.
type Case string

// Consumer cases.
const (
	AcceptBeforeAck     Case = "accept_before_ack"
	DuplicateRedelivery Case = "duplicate_redelivery"
	ChangedRedelivery   Case = "changed_redelivery"
	Invalid             Case = "invalid"
	DatabaseOutage      Case = "database_outage"
	ConsumerCut         Case = "connection_cut"
	Cancel              Case = "context_cancellation"
	Poison              Case = "poison"
	EmptyTenant         Case = "empty_tenant"
	ConsumerRestart     Case = "broker_restart"
)

// Publisher cases.
const (
	RelayEndToEnd    Case = "relay_end_to_end"
	PublisherCut     Case = "publisher_connection_cut"
	RelayKilled      Case = "relay_killed"
	PublisherRestart Case = "publisher_broker_restart"
	// PublisherContext: Publish returns at its context's deadline under a
	// blackholed connection, and publishes again after the fault.
	PublisherContext Case = "publisher_context"
)

// Dead-letter reasons a driver reports (the settle package's values).
const (
	ReasonDecode        = "decode"
	ReasonInvalid       = "invalid"
	ReasonConflict      = "conflict"
	ReasonDeliveryLimit = "delivery_limit"
)

// Accepter is what every adapter's consumer accepts into (each adapter
// declares the same interface).
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Broker is a broker process of the test's own (see Process).
type Broker interface {
	// Addr is the host:port it listens on.
	Addr() string
	// Restart kills it as a crash would (or, for a broker no setting
	// makes survive a crash, stops it cleanly; the driver says why) and
	// starts it again on the same port with the same data.
	Restart(t testing.TB)
}

// DeadLetter is one message on a channel's dead-letter destination.
type DeadLetter struct {
	MessageID string // the broker's message ID of the rejected message
	Reason    string // one of the Reason constants
	Payload   string // the rejected message's payload
	Receipt   string // for a conflict: the ID of the stored receipt it names
}

// skip skips t when the driver says case c cannot apply.
func skip(t *testing.T, skipper interface{ Skip(Case) string }, c Case) {
	t.Helper()
	if reason := skipper.Skip(c); reason != "" {
		t.Skipf("conformance: %s does not apply: %s", c, reason)
	}
}

// newClient is an inbox client on pool logging errors to the test.
func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newPool is a pool on a fresh migrated database.
func newPool(t testing.TB) *pgxpool.Pool { return drill.Pool(t, inboxtest.Database(t), nil) }

// newProxy is a fault proxy in front of addr, closed at test end.
func newProxy(t testing.TB, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// errDatabaseRefused is the spy's stand-in for a storage failure.
var errDatabaseRefused = errors.New("conformance: the accept failed (poison message)")

// spy wraps an Accepter: it counts attempts per message ID, can hold accepts
// at a gate until released, and can fail one message ID every time.
type spy struct {
	next   Accepter
	poison string

	mu       sync.Mutex
	attempts map[string]int
	failed   int
	gate     chan struct{} // nil: accepts pass
	entered  chan string
}

func newSpy(next Accepter) *spy {
	return &spy{next: next, attempts: map[string]int{}, entered: make(chan string, 1000)}
}

func (s *spy) Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
	s.mu.Lock()
	s.attempts[msg.MessageID]++
	gate := s.gate
	s.mu.Unlock()
	select {
	case s.entered <- msg.MessageID:
	default: // nobody is waiting for this many
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return inbox.AcceptResult{}, fmt.Errorf("conformance: accept held at the gate: %w", ctx.Err())
		}
	}
	if msg.MessageID == s.poison && s.poison != "" {
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
		return inbox.AcceptResult{}, errDatabaseRefused
	}
	res, err := s.next.Accept(ctx, msg)
	if err != nil && inbox.ActionFor(err) == inbox.ActionRetry {
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
	}
	return res, err
}

// hold makes accepts wait until the returned release is called.
func (s *spy) hold() (release func()) {
	g := make(chan struct{})
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(g)
		})
	}
}

// maxAttempts is the highest attempt count of one message.
func (s *spy) maxAttempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	most := 0
	for _, n := range s.attempts {
		most = max(most, n)
	}
	return most
}

func (s *spy) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}
