package settle

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Loss reports the loss of what a consumer consumed from (a queue, stream,
// group, topic or session that disappeared after it was found), once per
// loss: an Error log line, OnError, then Count. Found arms it again. Set its
// fields before use; it is safe for concurrent use.
type Loss struct {
	Log     *slog.Logger  // where the Error line goes
	Message string        // the log line's: "pginbox/nats: stream lost"
	OnError func(error)   // Config.OnError, or nil
	Count   *atomic.Int64 // the Stats counter of losses

	seen, armed atomic.Bool
}

// Found records that it is there (again): its next loss is reported.
func (l *Loss) Found() {
	l.seen.Store(true)
	l.armed.Store(true)
}

// Seen reports whether it was ever found: one missing from the start is a
// configuration error, not a loss.
func (l *Loss) Seen() bool { return l.seen.Load() }

// Report reports err, which wraps the adapter's ErrXLost sentinel, unless
// the loss was reported and nothing was found since. It says whether it
// reported.
func (l *Loss) Report(ctx context.Context, err error) bool {
	if !l.armed.Swap(false) {
		return false
	}
	l.Log.ErrorContext(ctx, l.Message, "err", err)
	if l.OnError != nil {
		l.OnError(err)
	}
	l.Count.Add(1) // counted once reported: whoever sees the count can see the report
	return true
}
