package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotDurable means the stream that captures a subject keeps messages in
// memory, so a message it acknowledged, and the relay marked published, is
// lost when the server restarts. A PubAck means "delivered" durably when the
// stream uses file storage; with one replica a power loss can still drop
// what the server had not synced (sync_interval, 2 minutes by default: set
// sync_interval: always, or use three replicas, to lose nothing). Recreate
// the stream with storage: file, or set PublisherConfig.AllowNotDurable.
var ErrNotDurable = errors.New("pginbox/nats: the stream does not store messages durably")

// durableSubjects remembers the subjects whose stream was checked and found
// to use file storage. A refused subject is checked again at its next
// publish, so a stream recreated with file storage is picked up.
type durableSubjects struct {
	mu sync.Mutex
	ok map[string]bool
}

// checkDurable refuses subject when the stream capturing it keeps messages
// in memory, unless AllowNotDurable is set. A lookup that fails (no stream
// yet, server away) is a retryable error.
func (p *Publisher) checkDurable(ctx context.Context, subject string) error {
	if p.cfg.AllowNotDurable {
		return nil
	}
	d := &p.durable
	d.mu.Lock()
	ok := d.ok[subject]
	d.mu.Unlock()
	if ok {
		return nil
	}
	name, err := p.js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("pginbox/nats: no stream captures the subject %q (the relay retries; create the stream): %w", subject, err)
	}
	if err != nil {
		return fmt.Errorf("pginbox/nats: finding the stream that captures %q (the relay retries): %w", subject, err)
	}
	s, err := p.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("pginbox/nats: reading stream %q (the relay retries): %w", name, err)
	}
	if st := s.CachedInfo().Config.Storage; st != jetstream.FileStorage {
		return fmt.Errorf("%w: stream %q (subject %q) has storage: %s; recreate it with storage: file, or set PublisherConfig.AllowNotDurable to accept losing acknowledged messages on a restart (the relay retries)", ErrNotDurable, name, subject, st)
	}
	d.mu.Lock()
	if d.ok == nil {
		d.ok = map[string]bool{}
	}
	d.ok[subject] = true
	d.mu.Unlock()
	return nil
}
