package webhook

import (
	"cmp"
	"context"
	"fmt"
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

func (c Config) validate() error {
	if len(c.Keys) == 0 {
		return cfgerr.New("webhook", "Config.Keys is empty: add at least one signing key")
	}
	seen := make(map[string]bool, len(c.Keys))
	for i, k := range c.Keys {
		field := fmt.Sprintf("Config.Keys[%d]", i)
		if err := cfgerr.First("webhook",
			cfgerr.If(k.ID == "", "%s.ID is empty", field),
			cfgerr.If(seen[k.ID], "%s.ID %q is used twice", field, k.ID),
			cfgerr.If(len(k.Secret) < MinSecretBytes, "%s.Secret has %d bytes, want at least %d (use 32 random bytes)", field, len(k.Secret), MinSecretBytes),
			cfgerr.Scope(field+".Scope", k.Scope),
			cfgerr.If(k.Scope.Kind == inbox.ScopeTenant && k.Scope.ID == "", "%s.Scope has an empty tenant ID", field),
		); err != nil {
			return err
		}
		seen[k.ID] = true
	}
	for i, h := range c.MetadataHeaders {
		if !validHeaderName(h) {
			return cfgerr.New("webhook", "Config.MetadataHeaders[%d] %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", i, h)
		}
	}
	return cfgerr.First("webhook",
		cfgerr.If(c.Decode == nil, "Config.Decode is nil: say how a body becomes an inbox.Message"),
		cfgerr.NotNegative("Config.Tolerance", c.Tolerance),
		cfgerr.If(c.MaxBodyBytes < 0, "Config.MaxBodyBytes is %d, want a positive size", c.MaxBodyBytes),
		cfgerr.NotNegative("Config.RetryAfter", c.RetryAfter),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Tolerance = cmp.Or(c.Tolerance, DefaultTolerance)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.RetryAfter = cmp.Or(c.RetryAfter, DefaultRetryAfter)
	return c
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
