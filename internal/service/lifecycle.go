// Package service is the runtime skeleton inbox.Worker and outbox.Relay share:
// starting and stopping once (Lifecycle, Run), their background goroutines
// (Loops), the LISTEN session that wakes them (Listener), their periodic jobs
// (Ticker), what those log with (Base) and the wake-up signal (Signal). What
// they do in those loops stays with them.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

var (
	// ErrStarted is in the error of a Start on a service started before.
	ErrStarted = errors.New("already started")
	// ErrRunning is in the error of CheckIdle on a started service.
	ErrRunning = errors.New("is running")
)

// Lifecycle makes a service start at most once and stop once: a later Start
// fails, and a Stop during or after the first one waits for it. A service is
// not started again after Stop. The zero value with a Name is ready to use.
type Lifecycle struct {
	// Name is the service's name in errors: "worker", "relay".
	Name string

	mu       sync.Mutex
	started  bool
	stopping atomic.Bool
	stopped  chan struct{} // closed once the first Stop stopped the service
}

// Start runs start, under the lock Stop and CheckIdle take, and marks the
// service started when it succeeds. It fails without running start when the
// service was started before.
func (l *Lifecycle) Start(start func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("pginbox: %s %w", l.Name, ErrStarted)
	}
	if err := start(); err != nil {
		return err
	}
	l.started = true
	l.stopped = make(chan struct{})
	return nil
}

// Stop marks a started service stopping and runs stop; it returns nil at once
// on a service that was never started. A concurrent or later Stop does not
// run stop again: it waits until the first one stopped the service, or until
// its own ctx is done. stop reports whether the service is stopped when it
// returns; when it gave up on something still running, later calls wait on
// their ctx.
func (l *Lifecycle) Stop(ctx context.Context, stop func() (stopped bool, err error)) error {
	l.mu.Lock()
	if !l.started {
		l.mu.Unlock()
		return nil
	}
	stopped := l.stopped
	if l.stopping.Swap(true) {
		l.mu.Unlock()
		select {
		case <-stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Unlock()
	done, err := stop()
	if done {
		close(stopped)
	}
	return err
}

// Stopping reports whether Stop was called, for the service's loops to hand
// back work they would otherwise start.
func (l *Lifecycle) Stopping() bool { return l.stopping.Load() }

// CheckIdle fails when the service was started: Drain runs its loop's work in
// the caller, alongside no running loop.
func (l *Lifecycle) CheckIdle() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("pginbox: %s %w: Drain is for a %s that was not started", l.Name, ErrRunning, l.Name)
	}
	return nil
}
