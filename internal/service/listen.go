package service

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener keeps a LISTEN session open and wakes its service's loop on the
// notifications it wants. The loop polls anyway, so while the session is down
// (or without a Listener) work is only found later.
type Listener struct {
	Base
	// Pool gives the session's connection, which it keeps: a listening
	// session must not go back to the pool.
	Pool *pgxpool.Pool
	// Subscribe runs the LISTEN query on conn.
	Subscribe func(ctx context.Context, conn *pgx.Conn) error
	// Wake is signalled after each subscription (what was sent meanwhile
	// was missed) and on each notification, unless Notified is set.
	Wake chan struct{}
	// Notified, if set, takes each notification's payload instead of Wake:
	// it wakes the loop for those that concern the service.
	Notified func(payload string)
	// Missed, if set, runs after each subscription instead of signalling
	// Wake: a service that treats notified work apart (Notified) must treat
	// what was sent before the session listened the same way.
	Missed func()
	// Retry is the wait before a new session after one was lost.
	Retry time.Duration
	// Subscribed, if set, runs each time a session subscribed and woke the
	// loop (a test hook).
	Subscribed func()
}

// Run listens until ctx is done, opening a new session Retry after one is
// lost, with a warning.
func (l *Listener) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		l.Log.Warn(l.prefix("LISTEN connection lost, polling until it is back"), "error", err)
		if !Sleep(ctx, l.Retry) {
			return
		}
	}
}

func (l *Listener) listen(ctx context.Context) error {
	pc, err := l.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if err := l.Subscribe(ctx, conn); err != nil {
		return err
	}
	// Notifications sent while not listening were missed.
	if l.Missed != nil {
		l.Missed()
	} else {
		Signal(l.Wake)
	}
	if l.Subscribed != nil {
		l.Subscribed()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if l.Notified != nil {
			l.Notified(n.Payload)
		} else {
			Signal(l.Wake)
		}
	}
}
