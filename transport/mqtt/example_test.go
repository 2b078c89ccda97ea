package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// A Consumer accepts each MQTT message into the inbox and acknowledges it
// (PUBACK) only after the accept committed. It needs an MQTT v5 broker
// (INBOX_TEST_MQTT_URL, default mqtt://127.0.0.1:1883).
func Example() {
	ctx := context.Background()
	dsn, dropDB := exampleDSN()
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	must(err)
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	must(err)

	brokerURL := exampleBrokerURL()
	id := randomID() // unique topics and session: examples and tests share the broker
	topic := "example/" + id + "/orders"
	consumer, err := mqtt.NewConsumer(client, mqtt.Config{
		ServerURL:       brokerURL,
		Scope:           inbox.Tenant("acme"),         // the topics' tenant: configuration, never payload
		ClientID:        "example-orders-inbox-" + id, // stable in production: it names the broker session
		Topics:          []string{topic},
		DeadLetterTopic: "example/" + id + "/dead",
		Decode: func(p *paho.Publish) (inbox.Message, error) {
			return inbox.Message{
				// MessageID stays empty: the message-id user property is used.
				Identity:      inbox.Identity{Source: "shop", Consumer: "orders.projection.v1"},
				EventType:     "order.created",
				SchemaVersion: 1,
				Payload:       json.RawMessage(p.Payload),
			}, nil
		},
		SessionExpiry: time.Second, // production keeps it long; the example's session should vanish
		Logger:        slog.New(slog.DiscardHandler),
	})
	must(err)
	// Accept notifies the workers (NotifyChannel) once the message is
	// stored: the example listens too, to read the receipt then.
	wake, err := pool.Acquire(ctx)
	must(err)
	defer wake.Release()
	_, err = wake.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	must(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx) }()

	pub := examplePublisher(brokerURL)
	defer pub.Disconnect(&paho.Disconnect{})
	props := &paho.PublishProperties{}
	props.User.Add("message-id", "evt-1")
	// A publish tells whether the consumer has subscribed yet ("no matching
	// subscribers"): MQTT has no other sign of another client's
	// subscription, so retry.
	for i := 0; i < 1000; i++ {
		resp, err := pub.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(`{"orderId":"o-1"}`), Properties: props})
		if err == nil && resp.ReasonCode == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = wake.Conn().WaitForNotification(wctx)
	cancel()
	must(err)
	var status string
	err = pool.QueryRow(ctx, `SELECT status FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&status)
	must(err)
	fmt.Println("evt-1:", status)
	stop()
	must(<-done)
	// Output: evt-1: PENDING
}

func exampleBrokerURL() string {
	if v := os.Getenv("INBOX_TEST_MQTT_URL"); v != "" {
		return v
	}
	return "mqtt://127.0.0.1:1883"
}

func examplePublisher(brokerURL string) *paho.Client {
	u, err := url.Parse(brokerURL)
	must(err)
	conn, err := net.Dial("tcp", u.Host)
	must(err)
	pub := paho.NewClient(paho.ClientConfig{Conn: conn})
	_, err = pub.Connect(context.Background(), &paho.Connect{ClientID: "example-publisher-" + randomID(), CleanStart: true})
	must(err)
	return pub
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// A relay publishing the outbox to an MQTT broker: each event goes to the
// topic its Destination names, at QoS 1, with the event ID in the
// message-id user property, and is marked published after the PUBACK. The
// receiving side subscribes first (a broker drops what nobody subscribes
// to); in production with a persistent session and a broker that saves
// after every change (see the README).
func ExampleNewPublisher() {
	ctx := context.Background()
	dsn, dropDB := exampleDSN() // production: os.Getenv("DATABASE_URL")
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	must(err)
	defer pool.Close()

	topic := "example/" + randomID() + "/billing" // unique: examples and tests share the broker
	got := make(chan *paho.Publish, 1)
	sub := examplePublisher(exampleBrokerURL()) // a plain client, subscribed below
	defer sub.Disconnect(&paho.Disconnect{})
	sub.AddOnPublishReceived(func(pr paho.PublishReceived) (bool, error) {
		select {
		case got <- pr.Packet:
		default:
		}
		return true, nil
	})
	_, err = sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
	must(err)

	pub, err := mqtt.NewPublisher(mqtt.PublisherConfig{ServerURL: exampleBrokerURL(), Logger: slog.New(slog.DiscardHandler)})
	must(err)
	defer pub.Close()
	// The event is emitted in the transaction that changes the invoice.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, outbox.Event{Source: "billing", Destination: topic, Type: "invoice.paid",
			SchemaVersion: 1, Payload: map[string]string{"invoiceId": "i-1"}})
		return err
	})
	must(err)
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	must(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()

	select {
	case m := <-got:
		u := m.Properties.User
		fmt.Println(u.Get(mqtt.DefaultIDProperty) != "", u.Get(mqtt.PropertySource), u.Get(mqtt.PropertyEventType), string(m.Payload))
	case <-time.After(30 * time.Second):
		fmt.Println("nothing published within 30s")
	}
	stop()
	must(<-done)
	// Output: true billing invoice.paid {"invoiceId":"i-1"}
}
