package sqs

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Dead-letter reasons (AttrReason).
const (
	ReasonDecode   = settle.ReasonDecode
	ReasonInvalid  = settle.ReasonInvalid
	ReasonConflict = settle.ReasonConflict
)

// Defaults for Config fields left at their zero value.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultWaitTime          = 20 * time.Second
	DefaultRetryDelay        = time.Second
	DefaultMaxRetryDelay     = time.Minute
	DefaultConcurrency       = 10
	DefaultAcceptTimeout     = 30 * time.Second
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Config configures a Consumer.
type Config struct {
	// Client talks to the queue server: an *sqs.Client (sqs.NewFromConfig),
	// with credentials, region and, for servers other than Amazon SQS,
	// BaseEndpoint. Required.
	Client API

	// QueueURL is the queue to consume, as GetQueueUrl returns it. Required.
	QueueURL string

	// Scope is the tenant (or global scope) of every message of the queue:
	// configuration decides it, never a message. Required.
	Scope inbox.Scope

	// Decode maps a message to the inbox message to accept. Required. The
	// message's Scope is overwritten with Scope; when it leaves MessageID
	// empty, the AttrMessageID message attribute is used (a Publisher sets
	// it to the event ID; the SQS MessageId is not used, because a producer's
	// resend gets a new one). An error from Decode rejects the message
	// (reason "decode").
	Decode func(types.Message) (inbox.Message, error)

	// DeadLetterQueueURL receives the messages the inbox rejects (and those
	// Decode fails on), with the reason in attributes (AttrReason, AttrError,
	// ...); the Consumer deletes a message only after its dead letter was
	// sent. Optional: when empty, a rejected message is made visible again at
	// once and left to the queue's redrive policy (RedrivePolicy with a
	// deadLetterTargetArn and maxReceiveCount), which moves it after
	// maxReceiveCount receives, without the reason. Without either, a
	// rejected message is received again and again until its retention
	// period ends.
	DeadLetterQueueURL string

	// VisibilityTimeout is how long a received message stays hidden from
	// other receivers. While an accept takes longer than half of it, the
	// Consumer extends it (ChangeMessageVisibility) by VisibilityTimeout
	// again, so a slow database does not cause redeliveries. Whole seconds;
	// defaults to DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration

	// WaitTime is the long-poll wait of one ReceiveMessage call, at most 20s.
	// Whole seconds; defaults to DefaultWaitTime.
	WaitTime time.Duration

	// RetryDelay is how long a message the database could not take stays
	// hidden after its first receive (ChangeMessageVisibility); it doubles
	// with every further receive up to MaxRetryDelay. The queue's redrive
	// policy (maxReceiveCount) is the delivery limit: with the retry delays
	// it is how long a database outage may last before messages move to the
	// queue's dead-letter queue. Defaults to DefaultRetryDelay.
	RetryDelay time.Duration

	// MaxRetryDelay caps the retry delay, at most 12 hours. Defaults to
	// DefaultMaxRetryDelay.
	MaxRetryDelay time.Duration

	// Concurrency is how many messages are accepted at once; receives ask
	// for up to min(Concurrency, 10). Defaults to DefaultConcurrency.
	Concurrency int

	// AcceptTimeout bounds one accept. An accept in flight when Run is
	// stopped is not cancelled but finishes within it, so it also bounds how
	// long a stop waits on a slow database. Defaults to
	// DefaultAcceptTimeout.
	AcceptTimeout time.Duration

	// Logger receives the consumer's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrQueueLost, once per loss. It is called from Run's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

// maxVisibility is SQS's limit on a visibility timeout.
const maxVisibility = 12 * time.Hour

func (c Config) validate() error {
	return cfgerr.First("sqs",
		cfgerr.If(c.Client == nil, "Config.Client is required: pass sqs.NewFromConfig(cfg)"),
		cfgerr.If(c.QueueURL == "", "Config.QueueURL is required: the URL GetQueueUrl returns"),
		cfgerr.Scope("Config.Scope", c.Scope),
		cfgerr.If(c.Decode == nil, "Config.Decode is required: map a message to an inbox.Message (DecodeEvent for a Publisher's messages)"),
		cfgerr.If(c.DeadLetterQueueURL == c.QueueURL, "Config.DeadLetterQueueURL is the consumed queue: name another queue, or leave it empty to rely on the redrive policy"),
		cfgerr.If(c.VisibilityTimeout < 2*time.Second || c.VisibilityTimeout > maxVisibility || c.VisibilityTimeout%time.Second != 0,
			"Config.VisibilityTimeout is %v: it must be whole seconds from 2s to 12h", c.VisibilityTimeout),
		cfgerr.If(c.WaitTime < time.Second || c.WaitTime > 20*time.Second || c.WaitTime%time.Second != 0,
			"Config.WaitTime is %v: it must be whole seconds from 1s to 20s", c.WaitTime),
		cfgerr.NotNegative("Config.RetryDelay", c.RetryDelay),
		cfgerr.If(c.MaxRetryDelay < c.RetryDelay || c.MaxRetryDelay > maxVisibility,
			"Config.MaxRetryDelay is %v: it must be from RetryDelay (%v) to 12h", c.MaxRetryDelay, c.RetryDelay),
		cfgerr.AtLeast("Config.Concurrency", c.Concurrency, 1),
		cfgerr.NotNegative("Config.AcceptTimeout", c.AcceptTimeout),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.VisibilityTimeout = cmp.Or(c.VisibilityTimeout, DefaultVisibilityTimeout)
	c.WaitTime = cmp.Or(c.WaitTime, DefaultWaitTime)
	c.RetryDelay, c.MaxRetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay), cmp.Or(c.MaxRetryDelay, DefaultMaxRetryDelay)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.AcceptTimeout = cmp.Or(c.AcceptTimeout, DefaultAcceptTimeout)
	return c
}

// retryDelay is how long a message stays hidden after its receives-th
// receive failed to accept.
func (c Config) retryDelay(receives int) time.Duration {
	return inbox.ExponentialBackoff(c.RetryDelay, 2, c.MaxRetryDelay, 0)(min(receives, 64))
}

// seconds rounds d up to whole seconds, as SQS takes them.
func seconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}
