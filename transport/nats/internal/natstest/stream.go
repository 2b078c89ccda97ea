// Package natstest holds what this module's tests share.
package natstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errStoreFailed is JetStream's "error creating store for stream".
const errStoreFailed jetstream.ErrorCode = 10049

// CreateStream creates a stream for the test and deletes it when the test
// ends. nats-server removes an account's storage directory when its last
// stream is deleted, so on a server that parallel tests share, a create
// that races that removal fails with errStoreFailed ("mkdir .../$G/streams:
// no such file or directory" in the server's log); it is tried again.
func CreateStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		_, err := js.CreateStream(context.Background(), cfg)
		var api *jetstream.APIError
		if err != nil && attempt < 5 && errors.As(err, &api) && api.ErrorCode == errStoreFailed {
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("creating stream %s: %v", cfg.Name, err)
		}
		break
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
}
