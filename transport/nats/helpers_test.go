package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgnats "github.com/pginbox/pginbox/transport/nats"
	"github.com/pginbox/pginbox/transport/nats/internal/natstest"
)

// Identity parts of every test message; the event type is the drill
// ledger's, so a drill.Ledger can apply them.
const (
	testTenant   = "tenant-a"
	testSource   = "nats-test"
	testConsumer = "orders.projection.v1"
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
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.subject}, Storage: jetstream.FileStorage})
	if withDead {
		e.captureDead(t)
	}
	return e
}

// captureDead creates the dead-letter stream.
func (e *env) captureDead(t testing.TB) {
	t.Helper()
	natstest.CreateStream(t, e.js, jetstream.StreamConfig{Name: e.deadName, Subjects: []string{e.dead}, Storage: jetstream.FileStorage})
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
	var err error
	if testkit.Poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = e.js.PublishMsg(ctx, m)
		return err == nil
	}) {
		return nil
	}
	return fmt.Errorf("publishing %s: %w", id, err)
}

// config is a Consumer configuration for e on the server at url (the
// test's server, or a proxy in front of it) with short retry delays.
func (e *env) config(url string, log *slog.Logger) pgnats.Config {
	return pgnats.Config{
		URL:               url,
		ConnectOptions:    []nats.Option{nats.ReconnectWait(50 * time.Millisecond)},
		Scope:             inbox.Tenant(testTenant),
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

// decodeOrder maps a test message: the scope comes from Config.Scope, the
// message ID from Nats-Msg-Id (both left empty here), the payload is the
// JSON data.
func decodeOrder(m jetstream.Msg) (inbox.Message, error) {
	if len(m.Data()) == 0 {
		return inbox.Message{}, errors.New("empty payload")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: testSource, Consumer: testConsumer},
		EventType:     drill.EventType,
		SchemaVersion: drill.SchemaVersion,
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

// consumerInfo reads the durable's state, waiting for Run to create it.
func (e *env) consumerInfo(t testing.TB) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var c jetstream.Consumer
	testkit.Eventually(t, 20*time.Second, func() bool {
		var err error
		c, err = e.js.Consumer(ctx, e.stream, e.durable)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}, "Run to create the durable consumer")
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

// start creates a Consumer for cfg and runs it until the test ends (or
// stop is called); Run must return nil.
func start(t testing.TB, acc pgnats.Accepter, cfg pgnats.Config) (stop func()) {
	t.Helper()
	c, err := pgnats.NewConsumer(acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drill.Run(t, c.Run)
}

// newClient is an inbox client on a fresh database (or on pool).
func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// natsURL is the shared broker's URL (skips or fails when it is missing).
func natsURL(t testing.TB) string { return brokertest.Require(t, brokertest.NATS) }

// receipts counts the stored receipts.
func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
