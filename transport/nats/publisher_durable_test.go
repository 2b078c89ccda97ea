package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/outbox"
	pgnats "github.com/pginbox/pginbox/transport/nats"
	"github.com/pginbox/pginbox/transport/nats/internal/natstest"
)

// A stream that keeps messages in memory loses what it acknowledged when
// the server restarts: the publisher refuses to publish to it by default,
// naming the setting, and publishes with the explicit opt-out.
func TestPublisherRefusesMemoryStream(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	e := newEnv(t, url, false)
	mem := e.stream + "_MEM"
	subject := e.subject + ".mem"
	natstest.CreateStream(t, e.js, jetstream.StreamConfig{Name: mem, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})

	p := newPublisher(t, url)
	errs := p.Publish(context.Background(), []outbox.Message{outMessage(subject, `{"n":1}`), outMessage(e.subject, `{"n":2}`)})
	if len(errs) != 2 || !errors.Is(errs[0], pgnats.ErrNotDurable) || !strings.Contains(errs[0].Error(), "storage") || !strings.Contains(errs[0].Error(), "AllowNotDurable") {
		t.Fatalf("publish to a memory stream: %v, want ErrNotDurable naming the storage setting and the opt-out", errs)
	}
	if errs[1] != nil {
		t.Fatalf("publish to the file stream beside it: %v", errs[1])
	}
	if info, err := e.js.Stream(context.Background(), mem); err != nil || info.CachedInfo().State.Msgs != 0 {
		t.Fatalf("the memory stream got a message anyway (%v)", err)
	}

	optOut, err := pgnats.NewPublisher(pgnats.PublisherConfig{URL: url, AllowNotDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = optOut.Close() })
	if errs := optOut.Publish(context.Background(), []outbox.Message{outMessage(subject, `{"n":3}`)}); errs != nil {
		t.Fatalf("publish with AllowNotDurable: %v", errs)
	}
}
