package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sivchari/kumo"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/internal/drill"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	base := []string{"-queue-url", "http://q/1/orders", "-tenant", "t", "-source", "s", "-consumer", "c"}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{base, nil, "-database-url (or DATABASE_URL) is required"},
		{[]string{"-database-url", "x"}, nil, "-queue-url is required"},
		{[]string{"-queue-url", "u", "-source", "s", "-consumer", "c"}, map[string]string{"DATABASE_URL": "x"}, "-tenant or -global is required"},
		{append(base, "-global"), map[string]string{"DATABASE_URL": "x"}, "-tenant and -global exclude each other"},
		{append(base, "extra"), map[string]string{"DATABASE_URL": "x"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), tc.args, env(tc.env), &stderr); code != brokercmd.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), brokercmd.ExitUsage, tc.want)
		}
	}
}

// The program accepts a queue's message into the inbox, deletes it, and
// exits 0 when its context ends.
func TestAcceptsFromQueue(t *testing.T) {
	srv := kumo.NewServer()
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_SQS", srv.URL)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	q, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("orders")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(`{"orderId":"o-1"}`),
		MessageAttributes: map[string]types.MessageAttributeValue{
			pgsqs.AttrMessageID: {DataType: aws.String("String"), StringValue: aws.String("evt-1")},
			pgsqs.AttrEventType: {DataType: aws.String("String"), StringValue: aws.String("order.created")},
		}})
	if err != nil {
		t.Fatal(err)
	}
	dsn := inboxtest.Database(t)
	pool := drill.Pool(t, dsn, nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- program.Run(ctx, []string{"-queue-url", aws.ToString(q.QueueUrl), "-tenant", "acme", "-source", "shop", "-consumer", "orders.v1"},
			env(map[string]string{"DATABASE_URL": dsn}), &stderr)
	}()
	drill.Eventually(t, 30*time.Second, "the receipt", func() bool { return count(t, pool, "order.created") == 1 })
	cancel()
	if code := <-done; code != brokercmd.ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Attributes["ApproximateNumberOfMessages"] != "0" || out.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Fatalf("the queue still holds the message: %v", out.Attributes)
	}
}

func count(t testing.TB, pool *pgxpool.Pool, eventType string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live WHERE scope_id = 'acme' AND event_type = $1`, eventType).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
