package rabbitmq_test

import (
	"io"
	"testing"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr/cfgerrtest"
	pkg "github.com/pginbox/pginbox/transport/rabbitmq"
)

// Every configuration refusal is an *inbox.ConfigError naming the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	var client *inbox.Client // never used: validation refuses first
	errs := map[string]error{}
	_, errs["NewConsumer"] = pkg.NewConsumer(client, pkg.Config{})
	_, errs["NewPublisher"] = pkg.NewPublisher(pkg.PublisherConfig{})
	cfgerrtest.Check(t, "rabbitmq", errs)
}

// Every publisher and consumer is an io.Closer.
var (
	_ io.Closer = (*pkg.Consumer)(nil)
	_ io.Closer = (*pkg.Publisher)(nil)
)
