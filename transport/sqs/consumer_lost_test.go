package sqs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

// The queue is deleted under a consumer that has consumed from it: the
// consumer reports ErrQueueLost to OnError and counts it in Stats, keeps
// running (Run does not return ErrQueueNotFound for good), and consumes
// again once the queue is back.
func TestQueueLostIsReportedAndRunGoesOn(t *testing.T) {
	t.Parallel()
	c := client(t)
	pool := newPool(t)
	name := "lost-" + randomID()
	url := createQueue(t, c, name, nil)
	var mu sync.Mutex
	var reported []error
	cfg := config(c, url, "", t)
	log, logs := testlog.Capture()
	cfg.Logger = log
	cfg.OnError = func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	cons, err := pgsqs.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()

	send(t, c, url, "evt-1", `{"orderId":"o-1"}`)
	drill.Eventually(t, 20*time.Second, "the first message stored", func() bool { return receipts(t, pool) == 1 })
	if _, err := c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	drill.Eventually(t, 30*time.Second, "ErrQueueLost reported", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v after the queue was deleted, want it to keep going", err)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return len(reported) > 0
	})
	mu.Lock()
	first := reported[0]
	mu.Unlock()
	if !errors.Is(first, pgsqs.ErrQueueLost) || !errors.Is(first, pgsqs.ErrQueueNotFound) {
		t.Fatalf("reported %v, want ErrQueueLost wrapping ErrQueueNotFound", first)
	}
	if n := cons.Stats().QueuesLost; n != 1 {
		t.Fatalf("Stats().QueuesLost = %d, want 1 (one loss, reported once)", n)
	}
	// More failed receives (each logs a retry): still one report.
	const retrying = "receiving failed; retrying"
	from := strings.Count(logs.String(), retrying)
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Count(logs.String(), retrying) >= from+3 },
		"three more failed receives")
	mu.Lock()
	n := len(reported)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d reports of one loss, want 1", n)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while the queue is gone, want it to keep going", err)
	default:
	}

	if again := createQueue(t, c, name, nil); again != url {
		t.Fatalf("the queue came back at %s, not %s", again, url)
	}
	send(t, c, url, "evt-2", `{"orderId":"o-2"}`)
	drill.Eventually(t, 30*time.Second, "the message sent after the queue came back stored", func() bool { return receipts(t, pool) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}
}
