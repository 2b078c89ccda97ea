package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/service"
)

func TestLifecycleStartsOnce(t *testing.T) {
	is := is.New(t)
	l := &service.Lifecycle{Name: "worker"}
	starts := 0
	start := func() error { starts++; return nil }
	is.NoErr(l.Start(start))
	err := l.Start(start)
	is.True(errors.Is(err, service.ErrStarted))
	is.Equal(err.Error(), "pginbox: worker already started")
	is.Equal(starts, 1) // the second Start did not run start
}

func TestLifecycleFailedStartIsNotStarted(t *testing.T) {
	is := is.New(t)
	l := &service.Lifecycle{Name: "relay"}
	boom := errors.New("schema too old")
	is.Equal(l.Start(func() error { return boom }), boom)
	is.NoErr(l.CheckIdle())
	is.NoErr(l.Stop(t.Context(), func() (bool, error) { t.Error("stop ran on a service never started"); return true, nil }))
	is.NoErr(l.Start(func() error { return nil }))
}

func TestLifecycleCheckIdle(t *testing.T) {
	is := is.New(t)
	l := &service.Lifecycle{Name: "relay"}
	is.NoErr(l.CheckIdle())
	is.NoErr(l.Start(func() error { return nil }))
	err := l.CheckIdle()
	is.True(errors.Is(err, service.ErrRunning))
	is.Equal(err.Error(), "pginbox: relay is running: Drain is for a relay that was not started")
}

// A Stop during the first one waits for it and does not stop again; so does
// one after it.
func TestLifecycleStopsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := is.New(t)
		l := &service.Lifecycle{Name: "worker"}
		is.NoErr(l.Start(func() error { return nil }))
		is.True(!l.Stopping())

		release := make(chan struct{})
		stops := 0
		firstErr := errors.New("first stop's own error")
		first := make(chan error, 1)
		go func() {
			first <- l.Stop(t.Context(), func() (bool, error) {
				stops++
				<-release
				return true, firstErr
			})
		}()
		synctest.Wait() // the first Stop runs its stop
		is.True(l.Stopping())
		second := make(chan error, 1)
		go func() {
			second <- l.Stop(t.Context(), func() (bool, error) { stops++; return true, nil })
		}()
		synctest.Wait() // the second Stop has returned or is blocked
		select {
		case <-second:
			t.Fatal("the second Stop returned before the first one stopped the service")
		default:
		}
		close(release)
		is.Equal(<-first, firstErr)
		is.NoErr(<-second)
		is.NoErr(l.Stop(t.Context(), func() (bool, error) { stops++; return true, nil }))
		is.Equal(stops, 1)
		is.True(errors.Is(l.Start(func() error { return nil }), service.ErrStarted)) // not restartable
	})
}

// When the first Stop gave up on something still running, a later Stop
// waits on its own ctx.
func TestLifecycleUnfinishedStop(t *testing.T) {
	is := is.New(t)
	l := &service.Lifecycle{Name: "relay"}
	is.NoErr(l.Start(func() error { return nil }))
	stuck := errors.New("publisher did not return")
	is.Equal(l.Stop(t.Context(), func() (bool, error) { return false, stuck }), stuck)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	is.Equal(l.Stop(ctx, func() (bool, error) { t.Error("stop ran twice"); return true, nil }), context.DeadlineExceeded)
}

// Start, Stop, Stopping and CheckIdle may race (run with -race).
func TestLifecycleConcurrent(t *testing.T) {
	l := &service.Lifecycle{Name: "worker"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_ = l.Start(func() error { return nil })
			_ = l.CheckIdle()
			_ = l.Stopping()
			_ = l.Stop(t.Context(), func() (bool, error) { return true, nil })
		})
	}
	wg.Wait()
	if !l.Stopping() {
		t.Fatal("not stopping after Stop")
	}
}

// fake is a Startable recording its calls.
type fake struct {
	startErr error
	calls    []string
	stopLeft time.Duration // time left to Stop's deadline
}

func (f *fake) Start(context.Context) error {
	f.calls = append(f.calls, "start")
	return f.startErr
}

func (f *fake) Stop(ctx context.Context) error {
	f.calls = append(f.calls, "stop")
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		f.stopLeft = time.Until(d)
	}
	return nil
}

// Run stops on a context of its own, bounded by stopWithin: its ctx is done.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(t.Context())
		f := &fake{}
		returned := make(chan error, 1)
		go func() { returned <- service.Run(ctx, f, time.Hour) }()
		synctest.Wait() // Run has returned or waits for ctx
		select {
		case <-returned:
			t.Fatal("Run returned before ctx was done")
		default:
		}
		cancel()
		is.NoErr(<-returned)
		is.Equal(f.calls, []string{"start", "stop"})
		is.True(f.stopLeft > 59*time.Minute)

		failed := &fake{startErr: errors.New("schema too old")}
		is.Equal(service.Run(t.Context(), failed, time.Hour), failed.startErr)
		is.Equal(failed.calls, []string{"start"}) // not stopped, and did not block
	})
}
