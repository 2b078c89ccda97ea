//go:build unix

package mqtt_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/mqtt"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, driver{})
}

// The publisher suite restarts its Mosquitto cleanly (SIGTERM): Mosquitto
// saves its database in its main loop after it sent the PUBACKs of the
// packets it read, so a SIGKILL can lose messages it just acknowledged
// (one CI run lost 1 of 300). The consumer suite's messages are all saved
// before its kills, so it kills.
func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, driver{cleanRestart: true})
}

// driver runs the conformance suites on Mosquitto.
type driver struct {
	cleanRestart bool // PrivateBroker restarts with SIGTERM, not SIGKILL
}

func (driver) SharedAddr(t *testing.T) string { return parseURL(t, brokerURL(t)).Host }

// PrivateBroker is a mosquitto of the test's own that writes its
// persistence file after every change (autosave_on_changes with an
// interval of 1): Mosquitto keeps sessions and queued messages in memory
// and, by default, saves them only every 30 minutes and at a clean stop, so
// a killed broker would lose everything since.
func (d driver) PrivateBroker(t *testing.T) conformance.Broker {
	p := startMosquitto(t)
	if d.cleanRestart {
		return conformance.Cleanly(p)
	}
	return killRecorder{p}
}

// killed holds the addresses of the private brokers a test SIGKILLed.
var killed sync.Map

// killRecorder is a private broker whose Restart (a SIGKILL) is recorded
// in killed.
type killRecorder struct{ *conformance.Process }

func (k killRecorder) Restart(t testing.TB) {
	killed.Store(k.Addr(), true)
	k.Process.Restart(t)
}

func startMosquitto(t *testing.T) *conformance.Process {
	return conformance.StartProcess(t, "mosquitto", "INBOX_TEST_MOSQUITTO", "/usr/sbin/mosquitto", func(port int, dir string) []string {
		conf := filepath.Join(dir, "mosquitto.conf")
		body := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\n"+
			"autosave_interval 1\nautosave_on_changes true\nmax_queued_messages 0\nlog_dest none\n", port, dir)
		if os.Geteuid() == 0 {
			body += "user root\n" // else it drops to the mosquitto user, who cannot write the test's directory
		}
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"-c", conf}
	})
}

func (driver) Skip(conformance.Case) string { return "" }

func (driver) Deduplicates() bool { return false } // MQTT brokers keep every copy

func (driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	return newPublisher(t, "mqtt://"+addr)
}

// NewDestination creates a persistent session subscribed to a fresh topic
// (QoS 1) and leaves it offline: the broker queues what is published for
// it, and Read resumes the session to drain the queue.
func (driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	id := randomID()
	d := &destination{url: "mqtt://" + addr, topic: "pgi/" + id + "/relay", cid: "pginbox-dest-" + id}
	s := d.connect(t, false, nil)
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if _, err := s.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: d.topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Disconnect(&paho.Disconnect{})
	t.Cleanup(func() { d.end() })
	return d
}

// destination is a persistent session subscribed to one topic.
type destination struct {
	url, topic, cid string

	mu  sync.Mutex
	got []conformance.Delivered // every message drained so far
}

func (d *destination) Name() string { return d.topic }

// Read resumes the session, takes (and acknowledges) what the broker
// queued for it, up to a marker published after it, and returns every
// message drained so far.
func (d *destination) Read(t testing.TB) []conformance.Delivered {
	d.mu.Lock()
	defer d.mu.Unlock()
	col := &collector{}
	c := d.connect(t, true, col.add)
	queued := drainThroughMarker(t, d.url, d.topic, col)
	_ = c.Disconnect(&paho.Disconnect{})
	dec := mqtt.DecodeEvent(conformance.Consumer)
	for _, p := range queued {
		m, err := dec(p)
		if err != nil {
			t.Fatal(err)
		}
		d.got = append(d.got, conformance.Delivered{ID: m.MessageID, OrderingKey: p.Properties.User.Get(mqtt.PropertyOrderingKey),
			Source: m.Source, EventType: m.EventType, SchemaVersion: m.SchemaVersion, Metadata: m.Metadata})
	}
	return slices.Clone(d.got)
}

// connect connects the session, clean start off even when it is new:
// Mosquitto (2.0.11) does not save a session that began with a clean
// start, whatever its expiry, so a restart would lose it (found by the
// broker-restart case). Resuming, the broker must still have it.
func (d *destination) connect(t testing.TB, resume bool, received func(*paho.Publish)) *paho.Client {
	t.Helper()
	expiry := uint32(time.Hour / time.Second)
	cfg := paho.ClientConfig{ClientID: d.cid}
	if received != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { received(pr.Packet); return true, nil },
		}
	}
	conn, err := net.DialTimeout("tcp", parseURL(t, d.url).Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Conn = conn
	c := paho.NewClient(cfg)
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	ack, err := c.Connect(ctx, &paho.Connect{ClientID: d.cid, CleanStart: false, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		t.Fatal(err)
	}
	if resume && !ack.SessionPresent {
		_ = c.Disconnect(&paho.Disconnect{})
		t.Fatalf("the broker no longer has session %s: what it queued for the destination is gone", d.cid)
	}
	return c
}

// end removes the session (a clean start with expiry 0), if the broker is
// still there.
func (d *destination) end() {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(d.url, "mqtt://"), 5*time.Second)
	if err != nil {
		return
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: d.cid, Conn: conn})
	ctx, cancel := contextTimeout(5 * time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: d.cid, CleanStart: true, KeepAlive: 30}); err != nil {
		_ = conn.Close()
		return
	}
	_ = c.Disconnect(&paho.Disconnect{})
}

func (driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	e := newEnv(t, "mqtt://"+addr)
	c := &channel{e: e, dead: e.subscribeDead(t)}
	// The consumer's session exists, subscribed, before anything is sent:
	// the broker drops messages nobody subscribes to.
	expiry := uint32(mqtt.DefaultSessionExpiry / time.Second)
	s := connectRaw(t, e.url, &paho.Connect{ClientID: e.cid, CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}, nil)
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if _, err := s.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: e.topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Disconnect(&paho.Disconnect{})
	// Runs after the consumers stopped: what the broker still holds for
	// the session, read by resuming it, is the broker's own count of the
	// messages never acknowledged. Not after a SIGKILL: Mosquitto then
	// restores its last save, which can predate acknowledgements it had
	// received, and sends those messages again. The consumer acknowledges
	// each copy again, so its count of acknowledgements reaches the number
	// sent, and the case stops it, while copies are still on their way.
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		n := e.leftovers(t)
		switch _, wasKilled := killed.Load(addr); {
		case n != 0 && wasKilled:
			t.Logf("the broker still held %d messages for the consumer's session at the end; not checked after a SIGKILL (see NewChannel)", n)
		case n != 0:
			t.Errorf("the broker still held %d messages for the consumer's session at the end", n)
		}
	})
	return c
}

// channel is a test env seen by the suite. The broker's count of a
// session's unacknowledged messages can only be read by resuming the
// session, which would take it over from the running consumer, so
// Unsettled counts what the consumers report settled, and the end of the
// case checks the broker's own count (see NewChannel).
type channel struct {
	e    *env
	dead *collector

	mu        sync.Mutex
	pub       *paho.Client
	sent      int
	consumers []*mqtt.Consumer
}

func (c *channel) Send(t testing.TB, id, payload string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pub == nil {
		c.pub = c.e.publisher(t)
	}
	if err := tryPublish(c.pub, c.e.topic, id, payload); err != nil {
		c.pub = c.e.publisher(t) // the broker restarted
		publish(t, c.pub, c.e.topic, id, payload)
	}
	c.sent++
}

// decodeConformance maps a message for the suite; an empty payload fails.
// The message ID comes from the message-id user property.
func decodeConformance(p *paho.Publish) (inbox.Message, error) {
	if len(p.Payload) == 0 {
		return inbox.Message{}, errors.New("empty payload")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       p.Payload,
	}, nil
}

func (c *channel) Start(t testing.TB, s conformance.Setup) (func(), error) {
	cfg := c.e.config("mqtt://"+s.Addr, s.Log)
	cfg.Scope = s.Scope
	cfg.Decode = decodeConformance
	cfg.DeliveryLimit = s.DeliveryLimit
	if cfg.DeliveryLimit == 0 {
		cfg.DeliveryLimit = 1000 // outlasts any outage a case makes
	}
	cfg.AcceptTimeout = 5 * time.Second // a held accept of the cancel case ends soon after the stop
	consumer, err := mqtt.NewConsumer(s.Accepter, cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.consumers = append(c.consumers, consumer)
	c.mu.Unlock()
	return drill.Run(t, consumer.Run), nil
}

func (c *channel) Unsettled(t testing.TB) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	open := int64(c.sent)
	for _, k := range c.consumers {
		s := k.Stats()
		open -= s.Acked + s.DeadLettered
	}
	return max(0, int(open)) // a message acknowledged twice (its first ack lost to a cut) counts twice
}

func (c *channel) DeadLetters(t testing.TB) []conformance.DeadLetter {
	var out []conformance.DeadLetter
	for _, p := range c.dead.all() {
		var props paho.UserProperties
		if p.Properties != nil {
			props = p.Properties.User
		}
		out = append(out, conformance.DeadLetter{
			MessageID: props.Get(mqtt.DefaultIDProperty),
			Reason:    props.Get(mqtt.PropertyReason),
			Payload:   string(p.Payload),
			Receipt:   props.Get(mqtt.PropertyReceipt),
		})
	}
	return out
}

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
