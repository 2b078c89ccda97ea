package webhook_test

import (
	"testing"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr/cfgerrtest"
	pkg "github.com/pginbox/pginbox/transport/webhook"
)

// Every configuration refusal is an *inbox.ConfigError naming the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	var client *inbox.Client // never used: validation refuses first
	errs := map[string]error{}
	_, errs["NewHandler"] = pkg.NewHandler(client, pkg.Config{})
	cfgerrtest.Check(t, "webhook", errs)
}
