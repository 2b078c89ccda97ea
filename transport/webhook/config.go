package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultTolerance    = 5 * time.Minute
	DefaultMaxBodyBytes = 1 << 20 // the inbox's default payload limit
	DefaultRetryAfter   = 5 * time.Second
)

// TraceHeaders are the W3C trace context headers, for
// Config.MetadataHeaders.
var TraceHeaders = []string{"traceparent", "tracestate"}

// MinSecretBytes is the shortest secret a Key may have. Use 32 random bytes.
const MinSecretBytes = 16

// Accepter is the part of *inbox.Client the handler uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Key is one sender's signing key and the tenant it speaks for.
type Key struct {
	// ID is sent in the Webhook-Key-Id header. Rotate a secret by adding a key
	// with a new ID, moving the sender to it, then removing the old one.
	ID string
	// Secret is the HMAC-SHA256 key, at least MinSecretBytes long.
	Secret []byte
	// Scope is the tenant (or global scope) of every event signed with this key.
	Scope inbox.Scope
}

// Config configures a Handler.
type Config struct {
	// Keys are the accepted signing keys. Required.
	Keys []Key

	// Decode turns a verified body into a message. Required. Identity.Scope is
	// overwritten with the key's scope, and with IdempotencyKey the message ID
	// with the header's value. An error answers 400 with the error's text.
	Decode func(body []byte, h http.Header) (inbox.Message, error)

	// IdempotencyKey requires an Idempotency-Key header on every request and
	// uses it as the message ID.
	IdempotencyKey bool

	// Tolerance is how far a request's timestamp may be from now, either way.
	// Older requests are refused as replays. Defaults to DefaultTolerance.
	Tolerance time.Duration

	// MaxBodyBytes is the largest body read; a larger one answers 413.
	// Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MetadataHeaders are request headers copied into the message's
	// metadata, under their lower-case names, when the request has them and
	// Decode did not set that key. TraceHeaders (W3C traceparent and
	// tracestate) lets a worker's tracing continue the sender's trace.
	// Defaults to none.
	MetadataHeaders []string

	// RetryAfter is sent with 503 responses. Defaults to DefaultRetryAfter.
	RetryAfter time.Duration

	// Logger receives refused requests (Debug) and storage failures (Warn).
	// Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if len(c.Keys) == 0 {
		return cfgerr.New("webhook", "Config.Keys is empty: add at least one signing key")
	}
	seen := make(map[string]bool, len(c.Keys))
	for i, k := range c.Keys {
		switch {
		case k.ID == "":
			return cfgerr.New("webhook", "Config.Keys[%d].ID is empty", i)
		case seen[k.ID]:
			return cfgerr.New("webhook", "Config.Keys[%d].ID %q is used twice", i, k.ID)
		case len(k.Secret) < MinSecretBytes:
			return cfgerr.New("webhook", "Config.Keys[%d].Secret has %d bytes, want at least %d (use 32 random bytes)", i, len(k.Secret), MinSecretBytes)
		case k.Scope.Kind != inbox.ScopeTenant && k.Scope.Kind != inbox.ScopeGlobal:
			return cfgerr.New("webhook", "Config.Keys[%d].Scope is unset: use inbox.Tenant(id) or inbox.Global()", i)
		case k.Scope.Kind == inbox.ScopeTenant && k.Scope.ID == "":
			return cfgerr.New("webhook", "Config.Keys[%d].Scope has an empty tenant ID", i)
		}
		seen[k.ID] = true
	}
	for i, h := range c.MetadataHeaders {
		if !validHeaderName(h) {
			return cfgerr.New("webhook", "Config.MetadataHeaders[%d] %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", i, h)
		}
	}
	switch {
	case c.Decode == nil:
		return cfgerr.New("webhook", "Config.Decode is nil: say how a body becomes an inbox.Message")
	case c.Tolerance < 0:
		return cfgerr.New("webhook", "Config.Tolerance is %v, want a positive duration", c.Tolerance)
	case c.MaxBodyBytes < 0:
		return cfgerr.New("webhook", "Config.MaxBodyBytes is %d, want a positive size", c.MaxBodyBytes)
	case c.RetryAfter < 0:
		return cfgerr.New("webhook", "Config.RetryAfter is %v, want a positive duration", c.RetryAfter)
	}
	return nil
}

// validHeaderName reports whether h is an HTTP header name (an RFC 9110
// token).
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}
