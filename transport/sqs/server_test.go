package sqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sivchari/kumo"
)

// The SQS-compatible server: kumo, an AWS emulator written in Go, run
// in-process on a loopback port, one for the test binary. It speaks the
// JSON protocol of the current SDK and keeps queues in memory.
var server = sync.OnceValue(func() *kumo.Server { return kumo.NewServer() })

// client is an SQS client of the test server.
func client(t testing.TB) *sqs.Client {
	t.Helper()
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(server().URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createQueue creates a queue (name ending in .fifo for a FIFO queue) with
// attrs and returns its URL.
func createQueue(t testing.TB, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	if len(name) > 5 && name[len(name)-5:] == ".fifo" {
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("creating queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// queueARN is the ARN of the queue at url.
func queueARN(t testing.TB, c *sqs.Client, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// redrive is a RedrivePolicy attribute moving messages to dlqARN after
// maxReceives receives.
func redrive(t testing.TB, dlqARN string, maxReceives int) map[string]string {
	t.Helper()
	p, err := json.Marshal(map[string]string{"deadLetterTargetArn": dlqARN, "maxReceiveCount": strconv.Itoa(maxReceives)})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{string(types.QueueAttributeNameRedrivePolicy): string(p)}
}

// counts is how many messages the queue holds: visible and in flight.
func counts(t testing.TB, c *sqs.Client, url string) (visible, inFlight int) {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight
}

// held is the number of messages the queue holds, in flight or not.
func held(t testing.TB, c *sqs.Client, url string) int {
	v, f := counts(t, c, url)
	return v + f
}

// send sends body to url with the message ID attribute id (none when "").
func send(t testing.TB, c *sqs.Client, url, id, body string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}
	if id != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{
			"pginbox.message_id": {DataType: aws.String("String"), StringValue: aws.String(id)},
		}
	}
	if _, err := c.SendMessage(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// drain receives and deletes every message url holds. The SDK retries a
// receive whose response it could not read (seen under load: the
// connection closed mid-body), and the messages the first attempt took stay
// in flight until their visibility timeout: drain receives with a short one
// and goes on until the queue reports none left, visible or in flight.
// From a FIFO queue it takes one message at a time: kumo puts messages whose
// visibility timeout ran out back at the head in no particular order, so
// two of one group taken by a lost receive could come back swapped.
func drain(t testing.TB, c *sqs.Client, url string) []types.Message {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	batch := int32(10)
	if strings.HasSuffix(url, ".fifo") {
		batch = 1
	}
	var all []types.Message
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: batch, WaitTimeSeconds: 1, VisibilityTimeout: 2,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			all = append(all, m)
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		if len(out.Messages) > 0 {
			continue
		}
		left := held(t, c, url)
		if left == 0 {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("draining %s: %d messages still in flight after 30s", url, left)
		}
	}
}
