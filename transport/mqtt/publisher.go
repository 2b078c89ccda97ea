package mqtt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// dialTimeout bounds opening a connection and waiting for the CONNACK.
const dialTimeout = 10 * time.Second

// packetTimeout is paho's own bound on a publish; far beyond any
// RelayConfig.PublishTimeout, so the relay's context decides. A connection
// that stopped answering fails its keepalive (20s) first.
const packetTimeout = time.Hour

// Publisher publishes outbox events to an MQTT v5 broker for an
// outbox.Relay, at QoS 1: a message counts as delivered only once the
// broker answered with a PUBACK, and a PUBACK with a reason code of 0x80 or
// above is that message's error. Every message carries the event ID in the
// "message-id" user property, so a Consumer (with DecodeEvent) accepts it
// under the event's ID and turns a re-publish into a Duplicate; MQTT brokers
// do not deduplicate. Create it with NewPublisher; it connects on first use
// and again after the connection went away. Close it when the relay stopped.
type Publisher struct {
	cfg    PublisherConfig
	server *url.URL
	log    *slog.Logger

	mu      sync.Mutex
	cli     *paho.Client // nil until the next Publish connects
	maxSize uint32       // the broker's Maximum Packet Size (CONNACK); 0: none

	connects, noSubscribers atomic.Int64
}

// NewPublisher returns a Publisher; it does not connect yet.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, err := cfgerr.Ready(cfg, PublisherConfig.withDefaults, PublisherConfig.validate)
	if err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, server: serverURL(cfg.ServerURL), log: cfg.Logger.With("client_id", cfg.ClientID)}, nil
}

// NoSubscribers is how many messages the broker dropped for want of a
// subscriber that counted as delivered (PublisherConfig.AllowNoSubscribers).
func (p *Publisher) NoSubscribers() int64 { return p.noSubscribers.Load() }

// Close disconnects. A later Publish connects again.
func (p *Publisher) Close() error {
	p.mu.Lock()
	cli := p.cli
	p.cli = nil
	p.mu.Unlock()
	if cli == nil {
		return nil
	}
	select {
	case <-cli.Done():
		return nil // the connection was already gone
	default:
	}
	if err := cli.Disconnect(&paho.Disconnect{}); err != nil {
		return fmt.Errorf("pginbox/mqtt: disconnecting: %w", err)
	}
	return nil
}

// Publish publishes msgs at QoS 1, all at once (the broker's Receive
// Maximum bounds how many are in flight), and waits for every PUBACK, or
// until ctx ends; see outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	pubs := make([]*paho.Publish, len(msgs))
	for i, m := range msgs {
		pubs[i], errs[i] = p.packet(m)
	}
	cli, maxSize, err := p.client(ctx)
	if err != nil {
		return fill(errs, fmt.Errorf("pginbox/mqtt: connecting to publish (the relay retries): %w", err))
	}
	var wg sync.WaitGroup
	for i, pb := range pubs {
		if errs[i] != nil {
			continue
		}
		if n := packetSize(pb); maxSize > 0 && n > int64(maxSize) {
			errs[i] = handler.Permanent(fmt.Errorf("%w: the packet is %d bytes, the broker's Maximum Packet Size is %d: emit smaller events or raise the broker's limit (Mosquitto: max_packet_size), then requeue it", ErrRejected, n, maxSize))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.publish(ctx, cli, pb)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// publish sends one message and maps the broker's answer.
func (p *Publisher) publish(ctx context.Context, cli *paho.Client, pb *paho.Publish) error {
	resp, err := cli.Publish(ctx, pb)
	switch {
	case resp != nil && resp.ReasonCode >= 0x80:
		return rejected(pb.Topic, resp)
	case err != nil:
		p.drop(cli) // the connection may hold a packet that never gets its PUBACK
		if ctx.Err() != nil {
			return fmt.Errorf("pginbox/mqtt: no PUBACK before the publish timeout (the relay retries; a copy that did arrive is a Duplicate at the receiving inbox): %w", ctx.Err())
		}
		return fmt.Errorf("pginbox/mqtt: publishing (the relay retries): %w", err)
	case resp.ReasonCode == reasonNoSubscribers:
		if p.cfg.AllowNoSubscribers {
			p.noSubscribers.Add(1)
			return nil
		}
		return fmt.Errorf("%w: topic %q: keep a persistent session subscribed to it, or set PublisherConfig.AllowNoSubscribers (the relay retries)", ErrNoSubscribers, pb.Topic)
	}
	return nil
}

// rejected maps a PUBACK reason code of 0x80 or above: permanent when the
// same message can never be accepted, retryable otherwise (unspecified and
// implementation-specific errors, not authorized until the ACL is fixed,
// quota exceeded).
func rejected(topic string, resp *paho.PublishResponse) error {
	why := ""
	if resp.Properties != nil && resp.Properties.ReasonString != "" {
		why = ": " + resp.Properties.ReasonString
	}
	err := fmt.Errorf("%w: topic %q: PUBACK reason code %#x%s", ErrRejected, topic, resp.ReasonCode, why)
	switch resp.ReasonCode {
	case 0x90, 0x95, 0x99: // topic name invalid, packet too large, payload format invalid
		return handler.Permanent(fmt.Errorf("%w: fix the event or the broker's limits, then requeue it", err))
	}
	return fmt.Errorf("%w (the relay retries)", err)
}

// packet maps an event to its MQTT message.
func (p *Publisher) packet(m outbox.Message) (*paho.Publish, error) {
	topic := p.cfg.Topic(m)
	if why := badTopic(topic); why != "" {
		return nil, handler.Permanent(fmt.Errorf("%w: topic %q %s: fix PublisherConfig.Topic or the event's destination, then requeue it", ErrRejected, topic, why))
	}
	props := &paho.PublishProperties{ContentType: "application/json"}
	props.User.Add(DefaultIDProperty, m.ID.String()).
		Add(PropertyEventType, m.EventType).
		Add(PropertySchemaVersion, strconv.Itoa(m.SchemaVersion)).
		Add(PropertySource, m.Source)
	if m.OrderingKey != "" {
		props.User.Add(PropertyOrderingKey, m.OrderingKey)
	}
	keys := make([]string, 0, len(m.Metadata))
	for k := range m.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		props.User.Add(PropertyMetadataPrefix+k, m.Metadata[k])
	}
	return &paho.Publish{Topic: topic, QoS: 1, Payload: m.Payload, Properties: props}, nil
}

// badTopic says what makes topic unusable as a topic name, or "".
func badTopic(topic string) string {
	switch {
	case topic == "":
		return "is empty"
	case len(topic) > 65535:
		return "is longer than 65535 bytes"
	case !utf8.ValidString(topic) || strings.ContainsRune(topic, 0):
		return "is not UTF-8 without U+0000"
	case strings.ContainsAny(topic, "+#"):
		return "has a wildcard (+ or #), which only subscriptions may use"
	}
	return ""
}

// packetSize is the size of pb on the wire.
func packetSize(pb *paho.Publish) int64 {
	n, _ := pb.Packet().WriteTo(io.Discard)
	return n
}

// client returns the live connection, connecting first if there is none.
func (p *Publisher) client(ctx context.Context) (*paho.Client, uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli != nil {
		select {
		case <-p.cli.Done():
			p.cli = nil
		default:
			return p.cli, p.maxSize, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", p.server.Host)
	if err != nil {
		return nil, 0, err
	}
	cli := paho.NewClient(paho.ClientConfig{
		ClientID:      p.cfg.ClientID,
		Conn:          conn,
		PacketTimeout: packetTimeout,
		OnClientError: func(err error) { p.log.Warn("pginbox/mqtt: publisher connection lost", "err", err) },
		OnServerDisconnect: func(d *paho.Disconnect) {
			p.log.Warn("pginbox/mqtt: the broker disconnected the publisher", "reason_code", d.ReasonCode)
		},
	})
	// Clean start, no session: a message whose PUBACK a lost connection
	// swallowed is the relay's to retry, not the client's to resend.
	cp := &paho.Connect{ClientID: p.cfg.ClientID, CleanStart: true, KeepAlive: 20}
	if p.cfg.Username != "" {
		cp.UsernameFlag, cp.Username = true, p.cfg.Username
	}
	if p.cfg.Password != nil {
		cp.PasswordFlag, cp.Password = true, p.cfg.Password
	}
	ack, err := cli.Connect(ctx, cp)
	if err != nil {
		_ = conn.Close()
		return nil, 0, err
	}
	var maxSize uint32
	if ack.Properties != nil {
		if q := ack.Properties.MaximumQoS; q != nil && *q < 1 {
			_ = cli.Disconnect(&paho.Disconnect{})
			return nil, 0, errors.New("the broker's Maximum QoS is 0 (CONNACK): it cannot acknowledge a message, so nothing can be published durably; allow QoS 1 on the broker")
		}
		if s := ack.Properties.MaximumPacketSize; s != nil {
			maxSize = *s
		}
	}
	p.cli, p.maxSize = cli, maxSize
	if p.connects.Add(1) > 1 {
		p.log.InfoContext(ctx, "pginbox/mqtt: publisher reconnected")
	}
	return cli, maxSize, nil
}

// drop disconnects cli if it is still the live connection; the next
// Publish connects again.
func (p *Publisher) drop(cli *paho.Client) {
	p.mu.Lock()
	mine := p.cli == cli
	if mine {
		p.cli = nil
	}
	p.mu.Unlock()
	if mine {
		_ = cli.Disconnect(&paho.Disconnect{})
	}
}

func fill(errs []error, err error) []error {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
	return errs
}
