//go:build unix

package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, driver{})
}

func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, driver{})
}

// driver runs the conformance suites on the test's SQS-compatible server
// (kumo, in-process), standard queues.
type driver struct{}

func (driver) SharedAddr(t *testing.T) string {
	u, err := url.Parse(server().URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// PrivateBroker is a kumo of the test's own in a child process, restarted
// cleanly (see startKumoProcess). Amazon SQS itself is a managed service
// whose durability is Amazon's: the restart cases check what the adapters
// do when their endpoint goes away and comes back with its queues.
func (driver) PrivateBroker(t *testing.T) conformance.Broker { return startKumoProcess(t) }

func (driver) Skip(conformance.Case) string { return "" }

// Deduplicates: the publisher cases read from FIFO queues (NewDestination),
// which drop a resend of an event ID within five minutes.
func (driver) Deduplicates() bool { return true }

// clientAt is an SQS client of the server (or proxy) at addr.
func clientAt(addr string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + addr),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// NewChannel creates a queue, a dead-letter queue for the consumer's
// rejects (with reasons) and a redrive queue: the queue's redrive policy
// (maxReceiveCount) is the SQS consumer's delivery limit, set in Start.
func (driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	c := clientAt(addr)
	id := randomID()
	ch := &channel{c: c, redrive: createQueue(t, c, "conf-redrive-"+id, nil), dlq: createQueue(t, c, "conf-dead-"+id, nil)}
	ch.queue = createQueue(t, c, "conf-"+id, nil)
	return ch
}

// NewDestination is a FIFO queue: only FIFO queues keep order (per message
// group, the event's ordering key), which the publisher cases check. A
// standard queue's order is best effort, and a receive the SDK retried
// returns its first attempt's messages only after their visibility timeout.
func (driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	c := clientAt(addr)
	return &channel{c: c, queue: createQueue(t, c, "conf-dest-"+randomID()+".fifo", nil)}
}

func (driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	return newPublisher(t, pgsqs.PublisherConfig{Client: clientAt(addr)})
}

type channel struct {
	c                   *sqs.Client
	queue, dlq, redrive string

	mu   sync.Mutex
	dead []types.Message // taken from the dead-letter queues so far
	read []types.Message // taken from the queue so far (publisher cases)
}

// attrEmpty marks a message standing for an empty payload: SQS refuses an
// empty body.
const attrEmpty = "conformance.empty"

func (c *channel) Send(t testing.TB, id, payload string) {
	if payload != "" {
		send(t, c.c, c.queue, id, payload)
		return
	}
	_, err := c.c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(c.queue), MessageBody: aws.String("-"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			pgsqs.AttrMessageID: {DataType: aws.String("String"), StringValue: aws.String(id)},
			attrEmpty:           {DataType: aws.String("String"), StringValue: aws.String("true")},
		}})
	if err != nil {
		t.Fatal(err)
	}
}

// decodeConformance maps a message for the suite; an empty body fails.
func decodeConformance(m types.Message) (inbox.Message, error) {
	if attr(m, attrEmpty) != "" {
		return inbox.Message{}, errors.New("empty body")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       []byte(aws.ToString(m.Body)),
	}, nil
}

func (c *channel) Start(t testing.TB, s conformance.Setup) (func(), error) {
	limit := s.DeliveryLimit
	if limit == 0 {
		limit = 1000 // SQS's maximum: outlasts any outage a case makes
	}
	_, err := c.c.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
		QueueUrl: aws.String(c.queue), Attributes: redrive(t, queueARN(t, c.c, c.redrive), limit),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(clientAt(s.Addr), c.queue, c.dlq, t)
	cfg.Logger = s.Log
	cfg.Scope = s.Scope
	cfg.Decode = decodeConformance
	cfg.AcceptTimeout = 5 * time.Second // a held accept of the cancel case ends soon after the stop
	consumer, err := pgsqs.NewConsumer(s.Accepter, cfg)
	if err != nil {
		return nil, err
	}
	return drill.Run(t, consumer.Run), nil
}

func (c *channel) Unsettled(t testing.TB) int { return held(t, c.c, c.queue) }

// DeadLetters is what the consumer dead-lettered (with its reason) and
// what the redrive policy moved after maxReceiveCount receives (reported
// with reason delivery_limit: that is the SQS consumer's delivery limit).
func (c *channel) DeadLetters(t testing.TB) []conformance.DeadLetter {
	rejected, moved := drain(t, c.c, c.dlq), drain(t, c.c, c.redrive)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range moved {
		if m.MessageAttributes == nil {
			m.MessageAttributes = map[string]types.MessageAttributeValue{}
		}
		m.MessageAttributes[pgsqs.AttrReason] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(conformance.ReasonDeliveryLimit)}
		c.dead = append(c.dead, m)
	}
	c.dead = append(c.dead, rejected...)
	var out []conformance.DeadLetter
	for _, m := range c.dead {
		out = append(out, conformance.DeadLetter{
			MessageID: attr(m, pgsqs.AttrMessageID),
			Reason:    attr(m, pgsqs.AttrReason),
			Payload:   aws.ToString(m.Body),
			Receipt:   attr(m, pgsqs.AttrReceipt),
		})
	}
	return out
}

func attr(m types.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

func (c *channel) Name() string { return c.queue }

// Read takes what the queue holds (keeping it for later calls) and decodes
// it with DecodeEvent.
func (c *channel) Read(t testing.TB) []conformance.Delivered {
	fresh := drain(t, c.c, c.queue)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = append(c.read, fresh...)
	decode := pgsqs.DecodeEvent(conformance.Consumer)
	var out []conformance.Delivered
	for _, m := range c.read {
		msg, err := decode(m)
		if err != nil {
			t.Fatal(fmt.Errorf("message %s: %w", aws.ToString(m.MessageId), err))
		}
		if _, err := strconv.Atoi(attr(m, pgsqs.AttrSchemaVersion)); err != nil {
			t.Fatalf("message %s: schema version attribute %q", aws.ToString(m.MessageId), attr(m, pgsqs.AttrSchemaVersion))
		}
		out = append(out, conformance.Delivered{ID: attr(m, pgsqs.AttrMessageID), OrderingKey: attr(m, pgsqs.AttrOrderingKey),
			Source: msg.Source, EventType: msg.EventType, SchemaVersion: msg.SchemaVersion, Metadata: msg.Metadata})
	}
	return out
}
