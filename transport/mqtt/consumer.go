package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Consumer moves messages from MQTT subscriptions into the inbox. Create it
// with New and run it with Run.
type Consumer struct {
	runner settle.Runner // lets Close end Run
	acc    Accepter
	cfg    Config
	server *url.URL
	log    *slog.Logger

	deliveries chan delivery

	attempts settle.Attempts[messageKey] // failed accepts, for DeliveryLimit

	acked, deadLettered, retries, connects, sessionsLost atomic.Int64
	sessionLoss                                          settle.Loss // found when a message arrives

	mu       sync.Mutex
	conn     net.Conn // the current network connection
	gen      uint64   // counts connections; a delivery belongs to one
	retrying bool     // this connection will be dropped to get redeliveries
}

// delivery is a received message and the connection it arrived on.
type delivery struct {
	gen uint64
	cli *paho.Client
	pb  *paho.Publish
}

// ErrSessionLost is reported (Config.OnError, an Error log line and
// Stats.SessionsLost) when the broker answers a reconnect without the
// session Run had consumed in: the session expired (Config.SessionExpiry),
// was taken over by another client with the same ClientID, or the broker
// restarted without persistence. The messages it held for the Consumer are
// gone. Run subscribes again and goes on with the new session.
var ErrSessionLost = errors.New("pginbox/mqtt: the broker lost the session after the consumer had consumed in it")

// Stats counts what a Consumer did since it was created.
type Stats struct {
	Acked        int64 // messages acknowledged after Accept (accepted or duplicate)
	DeadLettered int64 // messages published to the dead-letter topic, then acknowledged
	Retries      int64 // failed accepts answered with a reconnect for redelivery
	Connects     int64 // successful connects, the first included
	SessionsLost int64 // reconnects without the session Run had consumed in (ErrSessionLost)
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{Acked: c.acked.Load(), DeadLettered: c.deadLettered.Load(), Retries: c.retries.Load(),
		Connects: c.connects.Load(), SessionsLost: c.sessionsLost.Load()}
}

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
// It connects in Run.
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/mqtt: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		acc:        acc,
		cfg:        cfg,
		server:     serverURL(cfg.ServerURL),
		log:        cfg.Logger.With("client_id", cfg.ClientID),
		deliveries: make(chan delivery),
	}
	c.sessionLoss = settle.Loss{Log: c.log, Message: "pginbox/mqtt: session lost", OnError: cfg.OnError, Count: &c.sessionsLost}
	return c, nil
}

// Backoff between connection attempts: none for the first, then 100ms
// doubling to 5s.
func backoff(attempt int) time.Duration {
	if attempt == 0 {
		return 0
	}
	return reconnectBackoff(attempt)
}

var reconnectBackoff = inbox.ExponentialBackoff(100*time.Millisecond, 2, 5*time.Second, 0)

// ackInterval is how often paho sends the acknowledgements released so far
// (it sends them in the order the messages arrived).
const ackInterval = 10 * time.Millisecond

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.runner.Close() }

// Run connects, subscribes and consumes until ctx is cancelled; then it
// finishes the message in hand, disconnects (the broker keeps the session)
// and returns nil. Lost connections are re-established with backoff.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.runner.Begin(ctx)
	defer end()
	connCtx, stopConn := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConn()
	cm, err := autopaho.NewConnection(connCtx, autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{c.server},
		KeepAlive:                     20,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         uint32(c.cfg.SessionExpiry / time.Second),
		ReconnectBackoff:              backoff,
		AttemptConnection:             c.dial,
		ConnectUsername:               c.cfg.Username,
		ConnectPassword:               c.cfg.Password,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ack *paho.Connack) {
			c.connected(connCtx, ack)
			go c.subscribe(connCtx, cm, ack, c.generation())
		},
		OnConnectError: func(err error) { c.log.Warn("pginbox/mqtt: connecting failed; retrying", "err", err) },
		ClientConfig: paho.ClientConfig{
			ClientID:                   c.cfg.ClientID,
			EnableManualAcknowledgment: true,
			SendAcksInterval:           ackInterval,
			OnPublishReceived:          []func(paho.PublishReceived) (bool, error){c.received(connCtx)},
			OnClientError:              func(err error) { c.log.Warn("pginbox/mqtt: connection lost", "err", err) },
			OnServerDisconnect: func(d *paho.Disconnect) {
				c.log.Warn("pginbox/mqtt: the broker disconnected", "reason_code", d.ReasonCode)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("pginbox/mqtt: %w", err)
	}
	for {
		select {
		case d := <-c.deliveries:
			c.handle(ctx, d)
		case <-ctx.Done():
			time.Sleep(3 * ackInterval) // let paho send the last acknowledgements
			stopConn()
			<-cm.Done()
			return nil
		}
	}
}

// dial opens a connection and makes it the current one.
func (c *Consumer) dial(ctx context.Context, _ autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conn, c.retrying = conn, false
	c.gen++
	c.mu.Unlock()
	return conn, nil
}

// connected counts a connection and reports a session the broker no
// longer has after messages arrived in it.
func (c *Consumer) connected(ctx context.Context, ack *paho.Connack) {
	c.connects.Add(1)
	if !ack.SessionPresent {
		c.sessionLoss.Report(ctx, fmt.Errorf("%w: client ID %q: the messages it held are gone (session expired after Config.SessionExpiry, taken over by a client with the same ID, or a broker restart without persistence); Run subscribes again", ErrSessionLost, c.cfg.ClientID))
	}
}

// subscribe (re)subscribes after every connection; a refused subscription
// drops the connection, so it is tried again with backoff.
func (c *Consumer) subscribe(ctx context.Context, cm *autopaho.ConnectionManager, ack *paho.Connack, gen uint64) {
	subs := make([]paho.SubscribeOptions, len(c.cfg.Topics))
	for i, topic := range c.cfg.Topics {
		subs[i] = paho.SubscribeOptions{Topic: topic, QoS: 1, RetainHandling: 1}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	suback, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: subs})
	if err == nil {
		for i, code := range suback.Reasons {
			if code >= 0x80 && i < len(subs) {
				err = fmt.Errorf("the broker refused topic %q (reason code %#x)", subs[i].Topic, code)
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil { // not shutting down
			c.log.Error("pginbox/mqtt: subscribing failed; reconnecting", "err", err)
			c.dropConnection(gen)
		}
		return
	}
	c.log.Info("pginbox/mqtt: subscribed", "topics", c.cfg.Topics, "session_present", ack.SessionPresent)
}

// received hands a message from paho's router to Run's loop. Blocking here
// holds back further messages, which is the flow control wanted.
func (c *Consumer) received(ctx context.Context) func(paho.PublishReceived) (bool, error) {
	return func(pr paho.PublishReceived) (bool, error) {
		select {
		case c.deliveries <- delivery{gen: c.generation(), cli: pr.Client, pb: pr.Packet}:
		case <-ctx.Done():
		}
		return true, nil
	}
}

func (c *Consumer) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// current reports whether gen is the live connection and no reconnect for
// redeliveries is pending on it.
func (c *Consumer) current(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen == gen && !c.retrying
}

// retryLater drops connection gen after RetryDelay, so the broker
// redelivers what it has not acknowledged. Until then the connection's
// messages are skipped: acknowledgements go out in arrival order, so
// nothing after the retried message could be acknowledged anyway.
func (c *Consumer) retryLater(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.retrying {
		return
	}
	c.retrying = true
	time.AfterFunc(c.cfg.RetryDelay, func() { c.dropConnection(gen) })
}

// dropConnection closes connection gen if it is still the current one.
func (c *Consumer) dropConnection(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen && c.conn != nil {
		_ = c.conn.Close()
	}
}
