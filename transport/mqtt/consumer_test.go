package mqtt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	client := newClient(t, newPool(t))
	e := &env{topic: "t", dead: "d", cid: "c"}
	cases := []struct {
		name   string
		change func(*mqtt.Config)
		want   string
	}{
		{"server", func(c *mqtt.Config) { c.ServerURL = "" }, "Config.ServerURL: is required"},
		{"scheme", func(c *mqtt.Config) { c.ServerURL = "ws://127.0.0.1:1883" }, `Config.ServerURL: "ws://127.0.0.1:1883": want mqtt://host:port`},
		{"port", func(c *mqtt.Config) { c.ServerURL = "mqtt://127.0.0.1" }, "want mqtt://host:port"},
		{"scope", func(c *mqtt.Config) { c.Scope = inbox.Scope{} }, "Config.Scope: is unset"},
		{"client id", func(c *mqtt.Config) { c.ClientID = "" }, "Config.ClientID: is required"},
		{"topics", func(c *mqtt.Config) { c.Topics = nil }, "Config.Topics: is required"},
		{"decode", func(c *mqtt.Config) { c.Decode = nil }, "Config.Decode: is required"},
		{"dead letter", func(c *mqtt.Config) { c.DeadLetterTopic = "" }, "Config.DeadLetterTopic: is required"},
		{"delivery limit", func(c *mqtt.Config) { c.DeliveryLimit = -1 }, "Config.DeliveryLimit: is -1: it must be at least 1"},
		{"session expiry", func(c *mqtt.Config) { c.SessionExpiry = time.Millisecond }, "Config.SessionExpiry: is 1ms"},
		{"retry delay", func(c *mqtt.Config) { c.RetryDelay = -time.Second }, "Config.RetryDelay: is -1s"},
		{"accept timeout", func(c *mqtt.Config) { c.AcceptTimeout = -time.Second }, "Config.AcceptTimeout: is -1s"},
	}
	for _, tc := range cases {
		cfg := e.config("mqtt://127.0.0.1:1883", nil)
		tc.change(&cfg)
		if _, err := mqtt.NewConsumer(client, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := mqtt.NewConsumer(nil, e.config("mqtt://127.0.0.1:1883", nil)); err == nil || !strings.Contains(err.Error(), "pass an *inbox.Client") {
		t.Errorf("nil inbox client: err = %v", err)
	}
}

// Accepted and duplicate messages are acknowledged: resuming the session
// afterwards delivers nothing. The receipt exists once.
func TestAcceptThenAck(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	cfg := e.config(url, testlog.Errors(t))
	cfg.Decode = decodeByEventID
	c, err := mqtt.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := drill.Run(t, c.Run)

	pub := e.publisher(t)
	publish(t, pub, e.topic, "", `{"eventId":"evt-1","orderId":"o-1"}`)
	publish(t, pub, e.topic, "", `{"eventId":"evt-2","orderId":"o-2"}`)
	publish(t, pub, e.topic, "", `{"orderId":"o-1","eventId":"evt-1"}`) // redelivery by the producer, keys reordered
	drill.Eventually(t, 20*time.Second, "two receipts", func() bool { return receipts(t, pool) == 2 })
	testkit.Eventually(t, 20*time.Second, func() bool { return c.Stats().Acked == 3 }, "the three messages acknowledged, the duplicate too")
	stop()
	if n := e.leftovers(t); n != 0 {
		t.Fatalf("%d messages redelivered after a restart: not acknowledged", n)
	}
	if n := receipts(t, pool); n != 2 {
		t.Fatalf("%d receipts, want 2", n)
	}
	if n := len(dead.all()); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}

// Messages that can never be accepted are published to the dead-letter topic
// with their reason and acknowledged; nothing reaches the inbox.
func TestRejectToDeadLetter(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	stop := start(t, newClient(t, pool), e.config(url, testlog.Errors(t)))

	pub := e.publisher(t)
	publish(t, pub, e.topic, "bad-json", `{"orderId":`)
	publish(t, pub, e.topic, "empty", ``)
	publish(t, pub, e.topic, "", `{"orderId":"o-1"}`)
	drill.Eventually(t, 20*time.Second, "three dead letters", func() bool { return len(dead.all()) == 3 })
	want := []struct{ id, reason, err string }{
		{"bad-json", mqtt.ReasonInvalid, "invalid_json"},
		{"empty", mqtt.ReasonDecode, "empty payload"},
		{"", mqtt.ReasonDecode, `publish with a "message-id" user property`},
	}
	for i, dl := range dead.all() { // one publisher, one subscriber: in order
		u := dl.Properties.User
		if u.Get("message-id") != want[i].id || u.Get(mqtt.PropertyReason) != want[i].reason ||
			!strings.Contains(u.Get(mqtt.PropertyError), want[i].err) || u.Get(mqtt.PropertyTopic) != e.topic {
			t.Errorf("dead letter %d: %v; want %+v", i, u, want[i])
		}
	}
	stop()
	if n := e.leftovers(t); n != 0 {
		t.Fatalf("%d messages redelivered after a restart: not acknowledged", n)
	}
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}

// While nobody subscribes to the dead-letter topic the broker would drop a
// dead letter, so a rejected message is not acknowledged: it comes back
// after a reconnect, and once a subscriber exists it is dead-lettered.
func TestRejectWaitsForDeadLetterSubscriber(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	log, logs := testlog.Capture()
	start(t, newClient(t, pool), e.config(url, log))

	publish(t, e.publisher(t), e.topic, "bad-json", `{"orderId":`)
	drill.Eventually(t, 20*time.Second, "the message redelivered", func() bool {
		return strings.Count(logs.String(), "keep a persistent session subscribed to it") >= 2
	})
	dead := e.subscribeDead(t)
	drill.Eventually(t, 20*time.Second, "the dead letter", func() bool { return len(dead.all()) == 1 })
	if got := dead.all()[0].Properties.User.Get("message-id"); got != "bad-json" {
		t.Fatalf("dead letter of %q", got)
	}
}

// Run returns nil after cancel; a stopped consumer takes nothing, and the
// broker keeps the session's messages for the next run.
func TestRunStopsAndResumes(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	e.subscribeDead(t)
	stop := start(t, newClient(t, pool), e.config(url, testlog.Errors(t)))
	pub := e.publisher(t)
	publish(t, pub, e.topic, "m-1", `{"orderId":"o-1"}`)
	drill.Eventually(t, 20*time.Second, "the first receipt", func() bool { return receipts(t, pool) == 1 })
	stop()

	publish(t, pub, e.topic, "m-2", `{"orderId":"o-2"}`) // queued in the session
	// Nothing runs that could take it, so no event can say it was not
	// taken: watch for a while.
	testkit.Never(t, 200*time.Millisecond, func() bool { return receipts(t, pool) != 1 }, "a stopped consumer took a message")
	start(t, newClient(t, pool), e.config(url, testlog.Errors(t)))
	drill.Eventually(t, 20*time.Second, "the queued message accepted", func() bool { return receipts(t, pool) == 2 })
}

// A QoS 0 message is never redelivered: when its accept fails it is lost,
// and the log says so and what to do.
func TestQoS0RetryIsLogged(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	dsn := testDSN(t)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, url)
	log, logs := testlog.Capture()
	start(t, newClient(t, proxied), e.config(url, log))
	proxy.Refuse()

	pub := e.publisher(t)
	props := &paho.PublishProperties{}
	props.User.Add("message-id", "qos0")
	drill.Eventually(t, 20*time.Second, "the subscription", func() bool { return strings.Contains(logs.String(), "subscribed") })
	if _, err := pub.Publish(context.Background(), &paho.Publish{Topic: e.topic, QoS: 0, Payload: []byte(`{"orderId":"o-1"}`), Properties: props}); err != nil {
		t.Fatal(err)
	}
	drill.Eventually(t, 20*time.Second, "the log line", func() bool { return strings.Contains(logs.String(), "it is lost; publish with QoS 1") })
}

// A subscription the broker refuses (an invalid filter here) is logged and
// retried on a new connection.
func TestRefusedSubscriptionIsLogged(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	e := newEnv(t, url)
	log, logs := testlog.Capture()
	cfg := e.config(url, log)
	cfg.Topics = []string{e.topic + "/#/invalid"}
	start(t, newClient(t, newPool(t)), cfg)
	drill.Eventually(t, 20*time.Second, "two refusals", func() bool {
		s := logs.String()
		return strings.Count(s, "subscribing failed")+strings.Count(s, "the broker disconnected") >= 2
	})
}
