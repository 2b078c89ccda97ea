package otelinbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
)

// Bad configuration is refused with an *inbox.ConfigError naming the field
// and saying what to use instead.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg         otelinbox.Config
		field, hint string
	}{
		{otelinbox.Config{Trace: "child"}, "otelinbox.Config.Trace", "otelinbox.TraceParent or otelinbox.TraceLink"},
		{otelinbox.Config{MaxPayloadAttribute: -1}, "otelinbox.Config.MaxPayloadAttribute", "must not be negative"},
		{otelinbox.Config{EventBuffer: -5}, "otelinbox.Config.EventBuffer", "between 1 and"},
		{otelinbox.Config{EventBuffer: otelinbox.MaxEventBuffer + 1}, "otelinbox.Config.EventBuffer", "between 1 and"},
		{otelinbox.Config{BacklogInterval: otelinbox.MinBacklogInterval / 2}, "otelinbox.Config.BacklogInterval", "at least 100ms"},
		{otelinbox.Config{BacklogInterval: -1}, "otelinbox.Config.BacklogInterval", "at least 100ms"},
	} {
		_, err := otelinbox.New(tc.cfg)
		var ce *inbox.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want an *inbox.ConfigError", tc.cfg, err)
			continue
		}
		if ce.Field != tc.field || !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("%+v: %v, want field %s and %q", tc.cfg, err, tc.field, tc.hint)
		}
	}
	// Zero means the defaults, on the global providers.
	if _, err := otelinbox.New(otelinbox.Config{}); err != nil {
		t.Fatal(err)
	}
}

// Nil arguments are refused with an error that says what to pass.
func TestObserveNil(t *testing.T) {
	t.Parallel()
	tel, err := otelinbox.New(otelinbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tel.ObserveWorker(nil); err == nil || !strings.Contains(err.Error(), "inbox.NewWorker") {
		t.Errorf("ObserveWorker(nil): %v", err)
	}
	if _, err := tel.ObserveBacklog(nil); err == nil || !strings.Contains(err.Error(), "*pgxpool.Pool") {
		t.Errorf("ObserveBacklog(nil): %v", err)
	}
}
