package settle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

var errTestLost = errors.New("the queue disappeared")

// A loss is reported once (logged at Error, then OnError, then counted, so
// OnError sees the count without it), and again only after Found.
func TestLossReportsOnceThenAfterFound(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var count atomic.Int64
	var reported []error
	var countAtReport []int64
	l := &Loss{
		Log:     slog.New(slog.NewTextHandler(&logged, nil)),
		Message: "pginbox/test: queue lost",
		Count:   &count,
		OnError: func(err error) {
			reported = append(reported, err)
			countAtReport = append(countAtReport, count.Load())
		},
	}
	ctx := context.Background()
	if l.Seen() || l.Report(ctx, errTestLost) || len(reported) != 0 {
		t.Fatal("a loss reported before anything was found")
	}
	l.Found()
	if !l.Seen() {
		t.Fatal("Seen after Found is false")
	}
	if !l.Report(ctx, errTestLost) || l.Report(ctx, errTestLost) {
		t.Fatal("want the first Report to report and the second not")
	}
	if len(reported) != 1 || !errors.Is(reported[0], errTestLost) || count.Load() != 1 {
		t.Fatalf("reported %v, counted %d; want one report and one count", reported, count.Load())
	}
	if countAtReport[0] != 0 {
		t.Fatalf("OnError saw the count %d: counted before it was reported", countAtReport[0])
	}
	if out := logged.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, `msg="pginbox/test: queue lost"`) ||
		!strings.Contains(out, `err="the queue disappeared"`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("logged %q, want one Error line with the message and err", out)
	}

	l.Found() // back: the next loss is reported
	if !l.Report(ctx, errTestLost) || count.Load() != 2 || len(reported) != 2 {
		t.Fatalf("after Found: %d reported, counted %d; want 2 and 2", len(reported), count.Load())
	}
}

// OnError may be nil.
func TestLossWithoutOnError(t *testing.T) {
	t.Parallel()
	var count atomic.Int64
	l := &Loss{Log: slog.New(slog.DiscardHandler), Message: "lost", Count: &count}
	l.Found()
	if !l.Report(context.Background(), errTestLost) || count.Load() != 1 {
		t.Fatalf("counted %d, want 1", count.Load())
	}
}
