package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/service"
)

// The jobs run at start, not an interval later.
func TestTickerRunsAtOnce(t *testing.T) {
	var l logs
	ran := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tk := &service.Ticker{Name: "worker", Log: l.logger(), Interval: time.Hour, Jobs: []service.Job{{
		What: "lease recovery",
		Run:  func(context.Context) error { close(ran); return nil },
	}}}
	go tk.Run(ctx)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run at start")
	}
}

// The jobs run in order every interval, a failed one does not stop the next,
// and failures are logged with the service's prefix.
func TestTickerRunsEveryInterval(t *testing.T) {
	var l logs
	var mu sync.Mutex
	var order []string
	runs := make(chan struct{}, 100)
	record := func(name string, err error) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if name == "b" {
				runs <- struct{}{}
			}
			return err
		}
	}
	tk := &service.Ticker{Name: "worker", Log: l.logger(), Interval: 20 * time.Millisecond, Jobs: []service.Job{
		{What: "lease recovery", Run: record("a", errors.New("connection refused"))},
		{What: "purge", Run: record("b", nil)},
	}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		tk.Run(ctx)
		close(done)
	}()
	<-runs
	<-runs
	<-runs
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	for i, name := range order {
		if want := []string{"a", "b"}[i%2]; name != want {
			t.Fatalf("run order %v: job %d is %s, want %s", order, i, name, want)
		}
	}
	if n := l.count(`level=ERROR msg="pginbox worker: lease recovery failed" error="connection refused"`); n < 3 {
		t.Errorf("lease recovery failure logged %d times, want at least 3:\n%s", n, l.buf.String())
	}
	if n := l.count("purge failed"); n != 0 {
		t.Errorf("a job that succeeded was logged as failed")
	}
}

// A failure once ctx is done is the shutdown's, not logged.
func TestTickerQuietOnShutdown(t *testing.T) {
	var l logs
	ctx, cancel := context.WithCancel(t.Context())
	tk := &service.Ticker{Name: "relay", Log: l.logger(), Interval: time.Hour, Jobs: []service.Job{{
		What: "lease recovery",
		Run: func(ctx context.Context) error {
			cancel()
			return ctx.Err()
		},
	}}}
	tk.Run(ctx) // returns: ctx is done after the first run
	if n := l.count("failed"); n != 0 {
		t.Errorf("failure after ctx done was logged:\n%s", l.buf.String())
	}
}
