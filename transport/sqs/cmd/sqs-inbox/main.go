// Command sqs-inbox accepts the messages of an SQS queue into a pginbox
// inbox: each message is deleted only after its accept committed, made
// visible again after a backoff when the database fails, and sent to the
// dead-letter queue (or left to the queue's redrive policy) when it can
// never be accepted.
//
//	sqs-inbox -database-url postgres://app@localhost/app \
//	    -queue-url https://sqs.eu-west-1.amazonaws.com/123456789012/orders \
//	    -dead-letter-queue-url https://sqs.eu-west-1.amazonaws.com/123456789012/orders-dead \
//	    -tenant acme -source shop -consumer orders.projection.v1
//
// Credentials, region and endpoint come from the AWS SDK's usual sources
// (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_ENDPOINT_URL_SQS for an
// SQS-compatible server, ...). The scope comes from the flags (one tenant,
// or -global), never from the payload. The message ID is the
// pginbox.message_id message attribute, the event type the
// pginbox.event_type attribute unless -event-type is set, the payload the
// message body (JSON). It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox             brokercmd.Inbox
	queueURL, dlq     string
	visibilityTimeout time.Duration
	concurrency       int
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sqs-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.queueURL, "queue-url", "", "URL of the queue to consume (required)")
	fs.StringVar(&o.dlq, "dead-letter-queue-url", "", "queue for rejected messages (default: none; the queue's redrive policy moves them)")
	fs.DurationVar(&o.visibilityTimeout, "visibility-timeout", pgsqs.DefaultVisibilityTimeout, "visibility timeout of received messages, extended while an accept is slow")
	fs.IntVar(&o.concurrency, "concurrency", pgsqs.DefaultConcurrency, "messages accepted at once")
	o.inbox.Register(fs, getenv, "the pginbox.event_type message attribute")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	if o.queueURL == "" {
		return errors.New("-queue-url is required")
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("sqs-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("loading the AWS configuration (region, credentials): %w", err)
	}
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	c, err := pgsqs.NewConsumer(client, pgsqs.Config{
		Client:             sqs.NewFromConfig(awsCfg),
		QueueURL:           o.queueURL,
		DeadLetterQueueURL: o.dlq,
		Scope:              o.inbox.Scope(),
		VisibilityTimeout:  o.visibilityTimeout,
		Concurrency:        o.concurrency,
		Logger:             log,
		Decode: func(m types.Message) (inbox.Message, error) {
			typ := ""
			if a, ok := m.MessageAttributes[pgsqs.AttrEventType]; ok {
				typ = aws.ToString(a.StringValue)
			}
			return o.inbox.Message(typ, []byte(aws.ToString(m.Body))), nil
		},
	})
	if err != nil {
		return err
	}
	log.Info("sqs-inbox: consuming", "queue", o.queueURL, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}
