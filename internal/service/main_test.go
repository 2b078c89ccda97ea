package service_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// The Listener's tests run against a real PostgreSQL, from the test kit.
func TestMain(m *testing.M) { inboxtest.Main(m) }

// records is a slog.Handler keeping the records logged, for a test to read.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec.Clone())
	return nil
}

func (r *records) logger() *slog.Logger { return slog.New(r) }

// count returns how many records of level have the message msg.
func (r *records) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.list {
		if rec.Level == level && rec.Message == msg {
			n++
		}
	}
	return n
}

// total returns how many records were logged.
func (r *records) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.list)
}
