package mqtt_test

import (
	"testing"

	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// newPublisher is a Publisher for url, closed at test end.
func newPublisher(t testing.TB, url string) *mqtt.Publisher {
	t.Helper()
	p, err := mqtt.NewPublisher(mqtt.PublisherConfig{ServerURL: url, Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
