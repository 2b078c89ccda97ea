package pgtest

import (
	"context"
	"log/slog"
)

// Hooks for the external tests in package pgtest_test.

// SweepStale removes leftover cluster directories under base.
func SweepStale(base string) { sweepStale(base, slog.New(slog.DiscardHandler)) }

// TemplateName is the template database DB clones ("" before the first DB
// call or without a migrate function).
func TemplateName() string { return tmplName }

// ExternalModeError sets up INBOX_TEST_DATABASE_URL mode against dsn
// without touching the package's shared state, and returns the setup error.
func ExternalModeError(ctx context.Context, dsn string) error {
	e, err := newExternalEnv(ctx, dsn)
	if e != nil {
		e.closeIdle()
	}
	return err
}

// HaveParentDeathSignal reports whether servers die with their owner process.
func HaveParentDeathSignal() bool { return haveParentDeathSignal }
