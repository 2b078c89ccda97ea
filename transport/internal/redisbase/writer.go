package redisbase

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Writer is a publisher's side of Redis: it adds a relay's events, one
// command each, in one pipeline per batch.
type Writer struct {
	// Redis is the client to write through.
	Redis redis.UniversalClient
	// Pkg starts the errors ("pginbox/redisstream").
	Pkg string
	// Op is the command in errors ("XADD").
	Op string
	// WrongType is the transport's error for a key holding another type:
	// retrying cannot help until it is renamed or deleted, which Fix says
	// how to do.
	WrongType error
	Fix       string
	// NotDurable is the transport's ErrNotDurable, for Start.
	NotDurable error
}

// Start is the start of a publisher's constructor: cfg with its defaults
// (defaults) and valid (validate), and the Writer that writer makes of it,
// once Redis is found to persist what it acknowledges, unless writer says
// the config allows a Redis that does not (AllowNotDurable).
func Start[C any](cfg C, defaults func(C) C, validate func(C) error, writer func(C) (w Writer, allowNotDurable bool)) (C, Writer, error) {
	cfg, err := cfgerr.Ready(cfg, defaults, validate)
	if err != nil {
		return cfg, Writer{}, err
	}
	w, allowNotDurable := writer(cfg)
	if !allowNotDurable {
		err = checkDurable(w.Redis, w.NotDurable)
	}
	return cfg, w, err
}

// Add queues one event's command on pipe; an error (the event cannot be
// encoded) is the event's own and should be handler.Permanent.
type Add func(ctx context.Context, pipe redis.Pipeliner, m outbox.Message) (redis.Cmder, error)

// Publish adds msgs, each with add, in one pipeline, and returns nil or one
// error per message (see outbox.Publisher). It returns when ctx ends even if
// the client is still waiting for Redis (go-redis applies context deadlines
// to sockets only with ContextTimeoutEnabled); what that pipeline adds later
// is a copy the receiving side drops.
func (w Writer) Publish(ctx context.Context, msgs []outbox.Message, add Add) []error {
	done := make(chan []error, 1)
	go func() { done <- w.pipeline(ctx, msgs, add) }()
	select {
	case errs := <-done:
		return errs
	case <-ctx.Done():
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = fmt.Errorf("%s: no %s reply before the publish timeout (the relay retries): %w", w.Pkg, w.Op, ctx.Err())
		}
		return errs
	}
}

// pipeline runs the commands and returns nil or one error per message.
func (w Writer) pipeline(ctx context.Context, msgs []outbox.Message, add Add) []error {
	errs := make([]error, len(msgs))
	cmds := make([]redis.Cmder, len(msgs))
	_, _ = w.Redis.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, m := range msgs {
			cmds[i], errs[i] = add(ctx, pipe, m)
		}
		return nil
	})
	failed := false
	for i, c := range cmds {
		if errs[i] == nil && c != nil && c.Err() != nil {
			errs[i] = w.failed(c.Err())
		}
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil
	}
	return errs
}

// failed maps a failed command: a key holding another type can never take
// the event; anything else (connection, timeout, OOM) is retried.
func (w Writer) failed(err error) error {
	if strings.Contains(err.Error(), "WRONGTYPE") {
		return handler.Permanent(fmt.Errorf("%w: %s: %w: %s, then requeue the event", w.WrongType, w.Op, err, w.Fix))
	}
	return fmt.Errorf("%s: %s (the relay retries): %w", w.Pkg, w.Op, err)
}
