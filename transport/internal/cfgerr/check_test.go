package cfgerr

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
)

// First reports the first failed check as a ConfigError of the package's
// field; All is that first failure among its checks, as one check.
func TestFirst(t *testing.T) {
	err := First("nats",
		If(false, "Config.URL is required"),
		All(If(false, "Config.A is bad"), AtLeast("Config.DeliveryLimit", 1, 2), If(true, "Config.B is bad")),
		If(true, "Config.Stream is required"),
	)
	var ce *inbox.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
		t.Fatalf("%T %v: want an *inbox.ConfigError", err, err)
	}
	if ce.Field != "nats.Config.DeliveryLimit" || ce.Detail != "is 1: it must be at least 2" {
		t.Fatalf("field %q detail %q", ce.Field, ce.Detail)
	}
	if err := First("nats", If(false, "Config.URL is required"), All()); err != nil {
		t.Fatalf("no failed check: %v", err)
	}
}

func TestSharedChecks(t *testing.T) {
	for _, tc := range []struct {
		check Check
		want  string // "" when it passes
	}{
		{Scope("Config.Scope", inbox.Scope{}), "invalid k.Config.Scope: is unset: use inbox.Tenant(id) or inbox.Global()"},
		{Scope("Config.Scope", inbox.Global()), ""},
		{Scope("Config.Scope", inbox.Tenant("acme")), ""},
		{AtLeast("Config.BatchSize", int64(0), 1), "invalid k.Config.BatchSize: is 0: it must be at least 1"},
		{AtLeast("Config.BatchSize", int64(1), 1), ""},
		{NotNegative("Config.AcceptTimeout", -time.Second), "invalid k.Config.AcceptTimeout: is -1s: it must not be negative"},
		{NotNegative("Config.AcceptTimeout", 0), ""},
		{Delays(time.Minute, time.Second), "invalid k.Config.RetryDelay: 1m0s and MaxRetryDelay 1s: want 0 <= RetryDelay <= MaxRetryDelay"},
		{Delays(-time.Second, time.Second), "invalid k.Config.RetryDelay"},
		{Delays(time.Second, time.Second), ""},
	} {
		err := First("k", tc.check)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want it to pass", tc.check, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want %q", tc.check, err, tc.want)
		}
	}
}

type testConfig struct {
	Limit int
	route func(outbox.Message) string
}

func (c testConfig) withDefaults() testConfig {
	c.Limit = max(c.Limit, 3)
	c.route = Destination(c.route)
	return c
}

func (c testConfig) validate() error {
	return First("k", AtLeast("Config.Limit", c.Limit, 3))
}

// Prepare refuses a nil accepter before the config, and validates the
// config with its defaults; Ready does the latter.
func TestPrepare(t *testing.T) {
	if _, err := Prepare("pginbox/k: NewConsumer", nil, testConfig{}, testConfig.withDefaults, testConfig.validate); err == nil ||
		err.Error() != "pginbox/k: NewConsumer: accepter is nil: pass an *inbox.Client" {
		t.Fatalf("nil accepter: %v", err)
	}
	cfg, err := Prepare("pginbox/k: NewConsumer", struct{}{}, testConfig{}, testConfig.withDefaults, testConfig.validate)
	if err != nil || cfg.Limit != 3 {
		t.Fatalf("defaults: %+v, %v; want Limit 3 and valid", cfg, err)
	}
	if got := cfg.route(outbox.Message{Destination: "orders"}); got != "orders" {
		t.Fatalf("default route %q, want the Destination", got)
	}
	own := func(outbox.Message) string { return "mine" }
	cfg, err = Ready(testConfig{Limit: 5, route: own}, testConfig.withDefaults, testConfig.validate)
	if err != nil || cfg.Limit != 5 || cfg.route(outbox.Message{}) != "mine" {
		t.Fatalf("set fields: %+v, %v; want them kept", cfg, err)
	}
}
