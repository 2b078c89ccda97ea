package cfgerr

import (
	"errors"
	"testing"

	"github.com/pginbox/pginbox/inbox"
)

func TestNew(t *testing.T) {
	err := New("nats", "Config.Keys[%d].ID is used twice", 2)
	var ce *inbox.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
		t.Fatalf("%T %v: want an *inbox.ConfigError", err, err)
	}
	if ce.Field != "nats.Config.Keys[2].ID" || ce.Detail != "is used twice" {
		t.Fatalf("field %q detail %q", ce.Field, ce.Detail)
	}
	if err := New("kafka", "Config.URL: %v", errors.New("bad port")); err.(*inbox.ConfigError).Detail != "bad port" {
		t.Fatalf("detail %q", err.(*inbox.ConfigError).Detail)
	}
}
