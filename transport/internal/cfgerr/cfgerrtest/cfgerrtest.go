// Package cfgerrtest checks, in each transport's tests, that its
// constructors refuse a bad configuration the way cfgerr promises.
package cfgerrtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox"
)

// Check fails t for every error in errs (keyed by the call that returned it)
// that is not an *inbox.ConfigError whose field starts with pkg + ".".
func Check(t testing.TB, pkg string, errs map[string]error) {
	t.Helper()
	for what, err := range errs {
		var ce *inbox.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%s: %T %v, want an *inbox.ConfigError", what, err, err)
			continue
		}
		if !strings.HasPrefix(ce.Field, pkg+".") {
			t.Errorf("%s: field %q, want %s.<field>", what, ce.Field, pkg)
		}
	}
}
