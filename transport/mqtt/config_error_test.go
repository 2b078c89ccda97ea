package mqtt_test

import (
	"io"
	"testing"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr/cfgerrtest"
	pkg "github.com/pginbox/pginbox/transport/mqtt"
)

// Every configuration refusal is an *inbox.ConfigError naming the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	var client *inbox.Client // never used: validation refuses first
	errs := map[string]error{}
	_, errs["NewConsumer"] = pkg.NewConsumer(client, pkg.Config{})
	_, errs["NewPublisher"] = pkg.NewPublisher(pkg.PublisherConfig{})
	_, errs["NewPublisher bad URL"] = pkg.NewPublisher(pkg.PublisherConfig{ServerURL: "amqp://127.0.0.1:1883"})
	_, errs["NewPublisher no port"] = pkg.NewPublisher(pkg.PublisherConfig{ServerURL: "mqtt://127.0.0.1"})
	cfgerrtest.Check(t, "mqtt", errs)
}

// Every publisher and consumer is an io.Closer.
var (
	_ io.Closer = (*pkg.Consumer)(nil)
	_ io.Closer = (*pkg.Publisher)(nil)
)
