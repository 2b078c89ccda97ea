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
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

func main() { program.Main() }

var program = brokercmd.Program[pgsqs.Config]{Name: "sqs-inbox", EventType: "the pginbox.event_type message attribute", Flags: flags, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(c *pgsqs.Config) []brokercmd.Flag {
	return []brokercmd.Flag{
		brokercmd.Var(&c.QueueURL, "queue-url", "", "URL of the queue to consume").Required().Logged().
			Dial(func(ctx context.Context, _ *brokercmd.Session) error {
				awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
				if err != nil {
					return fmt.Errorf("loading the AWS configuration (region, credentials): %w", err)
				}
				c.Client = sqs.NewFromConfig(awsCfg)
				return nil
			}),
		brokercmd.Var(&c.DeadLetterQueueURL, "dead-letter-queue-url", "", "queue for rejected messages (default: none; the queue's redrive policy moves them)"),
		brokercmd.Var(&c.VisibilityTimeout, "visibility-timeout", pgsqs.DefaultVisibilityTimeout, "visibility timeout of received messages, extended while an accept is slow"),
		brokercmd.Var(&c.Concurrency, "concurrency", pgsqs.DefaultConcurrency, "messages accepted at once"),
	}
}

// serve makes the consumer of the configuration the flags set.
func serve(c *pgsqs.Config, s *brokercmd.Session) (brokercmd.Runner, error) {
	c.Scope, c.Logger = s.Scope(), s.Log
	c.Decode = func(m types.Message) (inbox.Message, error) {
		typ := ""
		if a, ok := m.MessageAttributes[pgsqs.AttrEventType]; ok {
			typ = aws.ToString(a.StringValue)
		}
		return s.Message(typ, []byte(aws.ToString(m.Body))), nil
	}
	return pgsqs.NewConsumer(s.Client, *c)
}
