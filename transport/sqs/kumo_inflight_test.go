package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// inflight is what a kumo child has handed out and not seen deleted, for
// standard queues: kumo does not save messages in flight (received, not
// deleted), so a restart would lose them, where Amazon SQS delivers them
// again once their visibility timeout ends. The child sends them again
// before kumo's last save (requeue). A receive whose reply was lost (under
// load, one was cut mid-body as kumo stopped and the SDK retried it) is
// recorded too: it is recorded before its reply is written.
type inflight struct {
	mu     sync.Mutex
	byID   map[string]heldMessage // by kumo's message ID
	handle map[string]string      // receipt handle -> message ID
}

type heldMessage struct {
	queueURL, handle, body string
	attributes             map[string]types.MessageAttributeValue
}

func newInflight() *inflight {
	return &inflight{byID: map[string]heldMessage{}, handle: map[string]string{}}
}

// track serves next, noting the messages of every successful
// ReceiveMessage and forgetting those of every successful DeleteMessage.
func (f *inflight) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
		if action != "ReceiveMessage" && action != "DeleteMessage" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ QueueUrl, ReceiptHandle string }
		_ = json.Unmarshal(body, &in)
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if rec.Code == http.StatusOK && !strings.HasSuffix(in.QueueUrl, ".fifo") {
			if action == "ReceiveMessage" {
				f.received(in.QueueUrl, rec.Body.Bytes())
			} else {
				f.deleted(in.ReceiptHandle)
			}
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (f *inflight) received(queueURL string, reply []byte) {
	var out struct {
		Messages []struct {
			MessageId, ReceiptHandle, Body string
			MessageAttributes              map[string]struct {
				DataType, StringValue string
				BinaryValue           []byte
			}
		}
	}
	if json.Unmarshal(reply, &out) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range out.Messages {
		attrs := map[string]types.MessageAttributeValue{}
		for name, a := range m.MessageAttributes {
			v := types.MessageAttributeValue{DataType: aws.String(a.DataType), BinaryValue: a.BinaryValue}
			if a.StringValue != "" {
				v.StringValue = aws.String(a.StringValue)
			}
			attrs[name] = v
		}
		f.byID[m.MessageId] = heldMessage{queueURL: queueURL, handle: m.ReceiptHandle, body: m.Body, attributes: attrs}
		f.handle[m.ReceiptHandle] = m.MessageId
	}
}

func (f *inflight) deleted(handle string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.handle[handle]
	delete(f.handle, handle)
	if m, ok := f.byID[id]; ok && m.handle == handle {
		delete(f.byID, id)
	}
}

// requeue sends every message still in flight again through c (kumo
// itself), as new messages: a copy of one the consumer already accepted is
// a Duplicate to the inbox.
func (f *inflight) requeue(ctx context.Context, c *sqs.Client) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, m := range f.byID {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.queueURL), MessageBody: aws.String(m.body), MessageAttributes: m.attributes})
		if err != nil {
			return err
		}
		delete(f.byID, id)
	}
	return nil
}

// A restart of the test's kumo keeps what was in flight, as Amazon SQS
// does: a message received and not deleted comes back after the restart.
func TestKumoRestartKeepsMessagesInFlight(t *testing.T) {
	t.Parallel()
	b := startKumoProcess(t)
	c := clientAt(b.Addr())
	url := createQueue(t, c, "restart-"+randomID(), nil)
	for _, id := range []string{"m-1", "m-2", "m-3"} {
		send(t, c, url, id, `{"orderId":"`+id+`"}`)
	}
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 2, VisibilityTimeout: 600,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 2 {
		t.Fatalf("received %d messages, want 2", len(out.Messages))
	}

	b.Restart(t)
	got := map[string]bool{}
	for _, m := range drain(t, c, url) {
		got[attr(m, "pginbox.message_id")] = true
	}
	if len(got) != 3 {
		t.Fatalf("after the restart the queue held %v, want m-1, m-2 and m-3", slices.Sorted(maps.Keys(got)))
	}
}
