package nats_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/faultproxy"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

// Identity parts of every test message.
const (
	testTenant   = "tenant-a"
	testSource   = "nats-test"
	testConsumer = "orders.projection.v1"
	testType     = "order.created"
)

// connect connects to url the way the Consumer needs (reconnect forever),
// with short reconnect waits so drills recover quickly.
func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url,
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.Name("pginbox-test"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // drills cause them on purpose
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// env is one test's streams on a NATS server: a source stream, a
// dead-letter stream capturing dead, and a JetStream handle for setup and
// checks (on its own connection, unaffected by the faults under test).
type env struct {
	js       jetstream.JetStream
	stream   string // source stream
	subject  string // subject to publish to
	dead     string // dead-letter subject
	deadName string // dead-letter stream
	durable  string
}

// newEnv creates uniquely named streams on the server at url and deletes them
// when the test ends. withDead false leaves the dead-letter subject uncaptured.
func newEnv(t testing.TB, url string, withDead bool) *env {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	id := randomID()
	e := &env{
		js:       js,
		stream:   "PGI_" + id,
		subject:  "pgi." + id + ".orders",
		dead:     "pgi." + id + ".dead",
		deadName: "PGI_" + id + "_DEAD",
		durable:  "inbox-" + id,
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.subject}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), e.stream) })
	if withDead {
		e.captureDead(t)
	}
	return e
}

// captureDead creates the dead-letter stream.
func (e *env) captureDead(t testing.TB) {
	t.Helper()
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: e.deadName, Subjects: []string{e.dead}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.js.DeleteStream(context.Background(), e.deadName) })
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

// publish publishes data with Nats-Msg-Id id (none when id is empty) and
// waits for the stream's acknowledgement, retrying while the server is away.
func (e *env) publish(t testing.TB, id string, data string) {
	t.Helper()
	if err := e.tryPublish(id, data); err != nil {
		t.Fatal(err)
	}
}

// tryPublish is publish for goroutines other than the test's.
func (e *env) tryPublish(id string, data string) error {
	m := &nats.Msg{Subject: e.subject, Header: nats.Header{}, Data: []byte(data)}
	if id != "" {
		m.Header.Set(jetstream.MsgIDHeader, id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := e.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("publishing %s: %w", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// config is a Consumer configuration for e with short retry delays.
func (e *env) config(log *slog.Logger) pgnats.Config {
	return pgnats.Config{
		Stream:            e.stream,
		Durable:           e.durable,
		Decode:            decodeOrder,
		DeadLetterSubject: e.dead,
		RetryDelay:        20 * time.Millisecond,
		MaxRetryDelay:     200 * time.Millisecond,
		AckWait:           5 * time.Second,
		Logger:            log,
	}
}

// decodeOrder maps a test message: identity from configuration, the message
// ID from Nats-Msg-Id (left empty here), the payload as JSON text.
func decodeOrder(m jetstream.Msg) (inbox.Message, error) {
	if len(m.Data()) == 0 {
		return inbox.Message{}, errors.New("empty payload")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant(testTenant), Source: testSource, Consumer: testConsumer},
		EventType:     testType,
		SchemaVersion: 1,
		Payload:       json.RawMessage(m.Data()),
	}, nil
}

// decodeByEventID takes the message ID from the payload's eventId.
func decodeByEventID(m jetstream.Msg) (inbox.Message, error) {
	msg, err := decodeOrder(m)
	if err != nil {
		return msg, err
	}
	var p struct {
		EventID string `json:"eventId"`
	}
	if err := json.Unmarshal(m.Data(), &p); err != nil {
		return msg, err
	}
	msg.MessageID = p.EventID
	return msg, nil
}

// consumerInfo reads the durable's state.
func (e *env) consumerInfo(t testing.TB) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, e.stream, e.durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// unsettled is how many messages the durable has not acked or terminated:
// not yet delivered plus delivered and waiting for an ack.
func (e *env) unsettled(t testing.TB) int {
	info := e.consumerInfo(t)
	return int(info.NumPending) + info.NumAckPending
}

// deadLetters reads every message of the dead-letter stream.
func (e *env) deadLetters(t testing.TB) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, e.deadName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// run runs c until the test ends (or stop is called) and fails the test if
// Run returns an error.
func run(t testing.TB, c *pgnats.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newConsumer(t testing.TB, nc *nats.Conn, client *inbox.Client, cfg pgnats.Config) *pgnats.Consumer {
	t.Helper()
	c, err := pgnats.New(nc, client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// natsURL is the shared broker's URL (skips or fails when it is missing).
func natsURL(t testing.TB) string { return brokertest.Require(t, brokertest.NATS) }

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// capture is a logger writing into a buffer the test can search.
func capture() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// quietLogger logs errors only, to the test log.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// dbProxy puts a fault proxy between a pool and the test database.
func dbProxy(t testing.TB, dsn string) (*faultproxy.Proxy, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, address := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	p, err := faultproxy.New(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	pool := newPool(t, dsn, func(c *pgxpool.Config) {
		c.ConnConfig.Host = "127.0.0.1"
		c.ConnConfig.Port = p.Port()
		c.ConnConfig.Fallbacks = nil
		c.ConnConfig.ConnectTimeout = 2 * time.Second
	})
	return p, pool
}

// tally is a drill's outcome: sent is what the broker acknowledged to the
// publisher, acked what the consumer acked, dead what went to the
// dead-letter subject, applied the distinct messages the handler applied,
// lost those never applied, doubled those applied more than once.
type tally struct{ sent, acked, dead, applied, lost, doubled int }

// apply runs a worker over every accepted receipt; its handler counts each
// application in the business table applied(message_id, n). It fills the
// tally's applied, lost and doubled for the message IDs that must apply.
func (r *tally) apply(t testing.TB, pool *pgxpool.Pool, ids []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS applied (message_id text PRIMARY KEY, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	err := reg.Register(handler.Key{Consumer: testConsumer, EventType: testType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, `INSERT INTO applied VALUES ($1, 1) ON CONFLICT (message_id) DO UPDATE SET n = applied.n + 1`, m.MessageID)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{testConsumer}, Concurrency: 4, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT message_id, n FROM applied`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		counts[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		switch n := counts[id]; {
		case n == 0:
			r.lost++
		case n > 1:
			r.doubled++
			r.applied++
		default:
			r.applied++
		}
	}
	for id, n := range counts { // applied but never meant to be
		if !slices.Contains(ids, id) {
			t.Errorf("message %s applied %d times, but it was not to be applied", id, n)
		}
	}
}

// check prints the drill's summary line and fails unless nothing was lost
// or applied twice and everything not dead-lettered was acked and applied.
func (r tally) check(t testing.TB, drill string) {
	t.Helper()
	line := fmt.Sprintf("%s: sent=%d acked=%d dead-lettered=%d applied=%d lost=%d doubled=%d",
		drill, r.sent, r.acked, r.dead, r.applied, r.lost, r.doubled)
	fmt.Println(line)
	if r.lost != 0 || r.doubled != 0 || r.acked+r.dead != r.sent || r.applied != r.sent-r.dead {
		t.Fatalf("drill failed: %s", line)
	}
}
