package cfgerr

import (
	"errors"

	"github.com/pginbox/pginbox/outbox"
)

// Prepare is the start of every transport constructor: acc (the
// *inbox.Client a consumer accepts through) must be set, and cfg gets its
// defaults, then must be valid. ctor names the constructor in the error of
// a nil acc ("pginbox/nats: NewConsumer"); defaults and validate are the
// config's own withDefaults and validate (method expressions such as
// Config.withDefaults), so each field's default stays beside its doc
// comment.
func Prepare[C any](ctor string, acc any, cfg C, defaults func(C) C, validate func(C) error) (C, error) {
	if acc == nil {
		return cfg, errors.New(ctor + ": accepter is nil: pass an *inbox.Client")
	}
	return Ready(cfg, defaults, validate)
}

// Ready returns cfg with its defaults, and validate's verdict on it: the
// start of a constructor that takes no accepter (a publisher).
func Ready[C any](cfg C, defaults func(C) C, validate func(C) error) (C, error) {
	cfg = defaults(cfg)
	return cfg, validate(cfg)
}

// Destination is route, or, when it is nil, the default route of every
// publisher: the message's Destination.
func Destination(route func(outbox.Message) string) func(outbox.Message) string {
	if route != nil {
		return route
	}
	return func(m outbox.Message) string { return m.Destination }
}
