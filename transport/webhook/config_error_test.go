package webhook_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox"
	pkg "github.com/pginbox/pginbox/transport/webhook"
)

// Every configuration refusal is an *inbox.ConfigError naming the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	var client *inbox.Client // never used: validation refuses first
	errs := map[string]error{}
	_, errs["NewHandler"] = pkg.NewHandler(client, pkg.Config{})
	for what, err := range errs {
		var ce *inbox.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%s: %T %v, want an *inbox.ConfigError", what, err, err)
			continue
		}
		if !strings.HasPrefix(ce.Field, "webhook.") {
			t.Errorf("%s: field %q, want webhook.<field>", what, ce.Field)
		}
	}
}
