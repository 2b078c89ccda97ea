package cfgerr

import (
	"time"

	"github.com/pginbox/pginbox/inbox"
)

// Check is one rule of a config's validate: when it fails, its message
// (starting with the field, as New wants) refuses the config.
type Check struct {
	failed bool
	format string
	args   []any
}

// If is the rule that refuses the config when failed holds.
func If(failed bool, format string, args ...any) Check {
	return Check{failed: failed, format: format, args: args}
}

// First returns the ConfigError of the first failed check, or nil. Order the
// checks as a user should fix them: what is required before what is tuned.
func First(pkg string, checks ...Check) error {
	for _, c := range checks {
		if c.failed {
			return New(pkg, c.format, c.args...)
		}
	}
	return nil
}

// All is the first of checks that fails, or none: the rules a family of
// configs shares, as one check.
func All(checks ...Check) Check {
	for _, c := range checks {
		if c.failed {
			return c
		}
	}
	return Check{}
}

// Scope refuses a scope that is neither a tenant nor global: the
// configuration, never a message, decides it.
func Scope(field string, s inbox.Scope) Check {
	return If(s.Kind != inbox.ScopeTenant && s.Kind != inbox.ScopeGlobal,
		"%s is unset: use inbox.Tenant(id) or inbox.Global()", field)
}

// AtLeast refuses a count (a delivery limit, a concurrency, a batch size)
// below least.
func AtLeast[N int | int64](field string, v, least N) Check {
	return If(v < least, "%s is %d: it must be at least %d", field, v, least)
}

// NotNegative refuses a negative duration (a timeout, a delay).
func NotNegative(field string, d time.Duration) Check {
	return If(d < 0, "%s is %v: it must not be negative", field, d)
}

// Delays refuses retry delays that do not grow from RetryDelay up to
// MaxRetryDelay.
func Delays(retry, maxRetry time.Duration) Check {
	return If(retry < 0 || maxRetry < retry,
		"Config.RetryDelay %v and MaxRetryDelay %v: want 0 <= RetryDelay <= MaxRetryDelay", retry, maxRetry)
}
