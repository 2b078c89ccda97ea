package service_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/service"
)

// The jobs run at start, not an interval later.
func TestTickerRunsAtOnce(t *testing.T) {
	var logged records
	ran := make(chan struct{})
	tk := &service.Ticker{Base: service.Base{Name: "worker", Log: logged.logger()}, Interval: time.Hour, Jobs: []service.Job{{
		What: "lease recovery",
		Run:  func(context.Context) error { close(ran); return nil },
	}}}
	go tk.Run(t.Context()) // cancelled when the test ends
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run at start")
	}
}

// The jobs run in order every interval, a failed one does not stop the next,
// and failures are logged as errors with the service's prefix.
func TestTickerRunsEveryInterval(t *testing.T) {
	var logged records
	var mu sync.Mutex
	var order []string
	rounds := make(chan struct{}, 100)
	job := func(name string, err error) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if name == "purge" {
				rounds <- struct{}{}
			}
			return err
		}
	}
	tk := &service.Ticker{
		Base:     service.Base{Name: "relay", Log: logged.logger()},
		Interval: 20 * time.Millisecond,
		Jobs: []service.Job{
			{What: "lease recovery", Run: job("recover", errors.New("connection refused"))},
			{What: "purge", Run: job("purge", nil)},
		},
	}
	ctx, cancel := context.WithCancel(t.Context())
	returned := make(chan struct{})
	go func() {
		tk.Run(ctx)
		close(returned)
	}()
	for range 3 {
		<-rounds
	}
	cancel()
	<-returned

	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < len(order); i += 2 {
		if !slices.Equal(order[i:min(i+2, len(order))], []string{"recover", "purge"}[:min(2, len(order)-i)]) {
			t.Fatalf("run order %v, want recover then purge each round", order)
		}
	}
	if n := logged.count(slog.LevelError, "pginbox relay: lease recovery failed"); n < 3 {
		t.Errorf("lease recovery failure logged %d times, want at least 3", n)
	}
	if n := logged.count(slog.LevelError, "pginbox relay: purge failed"); n != 0 {
		t.Errorf("a job that succeeded was logged as failed")
	}
}

// A failure once ctx is done is the shutdown's, not logged.
func TestTickerQuietOnShutdown(t *testing.T) {
	var logged records
	ctx, cancel := context.WithCancel(t.Context())
	tk := &service.Ticker{Base: service.Base{Name: "worker", Log: logged.logger()}, Interval: time.Hour, Jobs: []service.Job{{
		What: "lease recovery",
		Run: func(ctx context.Context) error {
			cancel()
			return ctx.Err()
		},
	}}}
	tk.Run(ctx) // returns: ctx is done after the first run
	if n := logged.total(); n != 0 {
		t.Errorf("%d records logged after ctx was done, want none", n)
	}
}
