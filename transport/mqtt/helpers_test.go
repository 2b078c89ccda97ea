package mqtt_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// Identity parts of every test message; the event type is the drill
// ledger's, so a drill.Ledger can apply them.
const (
	testTenant   = "tenant-a"
	testSource   = "mqtt-test"
	testConsumer = "orders.projection.v1"
)

// brokerURL is the shared broker's URL (skips or fails when it is missing).
func brokerURL(t testing.TB) string { return brokertest.Require(t, brokertest.MQTT) }

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is one test's topics and session name on the shared broker.
type env struct {
	url              string
	topic, dead, cid string
}

// newEnv names the test's topics and consumer session; when the test ends
// the session is resumed once more and ended (see leftovers).
func newEnv(t testing.TB, url string) *env {
	t.Helper()
	id := randomID()
	e := &env{url: url, topic: "pgi/" + id + "/orders", dead: "pgi/" + id + "/dead", cid: "pginbox-test-" + id}
	t.Cleanup(func() { e.leftovers(t) })
	return e
}

// connectRaw connects a plain paho client. received gets every message (acked
// automatically).
func connectRaw(t testing.TB, url string, connect *paho.Connect, received func(*paho.Publish)) *paho.Client {
	t.Helper()
	u := parseURL(t, url)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{ClientID: connect.ClientID, Conn: conn}
	if received != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { received(pr.Packet); return true, nil },
		}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, connect); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

func parseURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// publisher connects a client that publishes to the test's topic.
func (e *env) publisher(t testing.TB) *paho.Client {
	return connectRaw(t, e.url, &paho.Connect{ClientID: "pginbox-pub-" + randomID(), CleanStart: true, KeepAlive: 30}, nil)
}

// publish publishes at QoS 1 with message ID id (no user property when
// empty), retrying until the broker reports a subscriber.
func publish(t testing.TB, pub *paho.Client, topic, id, payload string) {
	t.Helper()
	if err := tryPublish(pub, topic, id, payload); err != nil {
		t.Fatal(err)
	}
}

func tryPublish(pub *paho.Client, topic, id, payload string) error {
	props := &paho.PublishProperties{}
	if id != "" {
		props.User.Add("message-id", id)
	}
	var resp *paho.PublishResponse
	var err error
	// 0x10 until the consumer has subscribed.
	if testkit.Poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err = pub.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(payload), Properties: props})
		return err == nil && resp.ReasonCode == 0
	}) {
		return nil
	}
	return fmt.Errorf("publishing %s: %v (reason code %v)", id, err, resp)
}

// drainThroughMarker publishes a marker to topic, to which the session
// resumed with col as its receiver subscribes, and waits until col has it:
// the broker delivers a session's messages in order, the ones it held for
// the session first. It returns what came before the marker. A session
// that subscribes to nothing (it ended, or never subscribed) held nothing.
func drainThroughMarker(t testing.TB, url, topic string, col *collector) []*paho.Publish {
	t.Helper()
	marker := "pginbox-test-marker-" + randomID()
	pub := connectRaw(t, url, &paho.Connect{ClientID: "pginbox-pub-" + randomID(), CleanStart: true, KeepAlive: 30}, nil)
	defer pub.Disconnect(&paho.Disconnect{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := pub.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(marker)})
	switch {
	case err != nil:
		t.Fatalf("publishing the marker: %v", err)
	case resp.ReasonCode == packets.PubackNoMatchingSubscribers:
		return col.all()
	case resp.ReasonCode != 0:
		t.Fatalf("publishing the marker: reason code %d", resp.ReasonCode)
	}
	var before []*paho.Publish
	testkit.Eventually(t, 30*time.Second, func() bool {
		got := col.all()
		i := slices.IndexFunc(got, func(p *paho.Publish) bool { return string(p.Payload) == marker })
		before = got[:max(i, 0)]
		return i >= 0
	}, "the marker published after what the session held")
	return before
}

// collector gathers the messages of a subscription.
type collector struct {
	mu   sync.Mutex
	msgs []*paho.Publish
}

func (c *collector) add(p *paho.Publish) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, p)
}

func (c *collector) all() []*paho.Publish {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

// subscribeDead subscribes a client to the dead-letter topic.
func (e *env) subscribeDead(t testing.TB) *collector {
	t.Helper()
	col := &collector{}
	c := connectRaw(t, e.url, &paho.Connect{ClientID: "pginbox-dead-" + randomID(), CleanStart: true, KeepAlive: 30}, col.add)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: e.dead, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	return col
}

// leftovers resumes the consumer's session (the Consumer must be stopped)
// and counts what the broker delivers before a marker published after it:
// the messages the Consumer never acknowledged. The session ends with this
// connection.
func (e *env) leftovers(t testing.TB) int {
	t.Helper()
	col := &collector{}
	expiry := uint32(0)
	c := connectRaw(t, e.url, &paho.Connect{ClientID: e.cid, CleanStart: false, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}, col.add)
	n := len(drainThroughMarker(t, e.url, e.topic, col))
	_ = c.Disconnect(&paho.Disconnect{})
	return n
}

// config is a Consumer configuration for e with a short retry delay.
func (e *env) config(url string, log *slog.Logger) mqtt.Config {
	return mqtt.Config{
		ServerURL:       url,
		Scope:           inbox.Tenant(testTenant),
		ClientID:        e.cid,
		Topics:          []string{e.topic},
		Decode:          decodeOrder,
		DeadLetterTopic: e.dead,
		RetryDelay:      100 * time.Millisecond,
		Logger:          log,
	}
}

// decodeOrder maps a test message: the scope comes from Config.Scope, the
// message ID from the message-id user property (both left empty here).
func decodeOrder(p *paho.Publish) (inbox.Message, error) {
	if len(p.Payload) == 0 {
		return inbox.Message{}, errors.New("empty payload")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: testSource, Consumer: testConsumer},
		EventType:     drill.EventType,
		SchemaVersion: drill.SchemaVersion,
		Payload:       json.RawMessage(p.Payload),
	}, nil
}

// decodeByEventID takes the message ID from the payload's eventId.
func decodeByEventID(p *paho.Publish) (inbox.Message, error) {
	msg, err := decodeOrder(p)
	if err != nil {
		return msg, err
	}
	var v struct {
		EventID string `json:"eventId"`
	}
	if err := json.Unmarshal(p.Payload, &v); err != nil {
		return msg, err
	}
	msg.MessageID = v.EventID
	return msg, nil
}

// start creates a Consumer for cfg and runs it until the test ends (or
// stop is called); Run must return nil.
func start(t testing.TB, acc mqtt.Accepter, cfg mqtt.Config) (stop func()) {
	t.Helper()
	c, err := mqtt.NewConsumer(acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drill.Run(t, c.Run)
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
