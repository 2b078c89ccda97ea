package kafka_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox"
	pkg "github.com/pginbox/pginbox/transport/kafka"
)

// Every configuration refusal is an *inbox.ConfigError naming the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	var client *inbox.Client // never used: validation refuses first
	errs := map[string]error{}
	_, errs["NewConsumer"] = pkg.NewConsumer(client, pkg.Config{})
	_, errs["NewPublisher"] = pkg.NewPublisher(pkg.PublisherConfig{})
	for what, err := range errs {
		var ce *inbox.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%s: %T %v, want an *inbox.ConfigError", what, err, err)
			continue
		}
		if !strings.HasPrefix(ce.Field, "kafka.") {
			t.Errorf("%s: field %q, want kafka.<field>", what, ce.Field)
		}
	}
}
