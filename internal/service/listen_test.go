package service_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/service"
)

const channel = "service_test"

// listening starts a Listener on a new database and returns once it
// subscribed, with its wake-up channel drained. pid is its session's backend.
func listening(t *testing.T, l *logs, wants func(string) bool) (pool *pgxpool.Pool, wake chan struct{}, pid *atomic.Uint32, subscribed chan struct{}, stop func()) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), inboxtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	wake = make(chan struct{}, 1)
	pid = new(atomic.Uint32)
	subscribed = make(chan struct{}, 10)
	ln := &service.Listener{
		Name: "worker",
		Log:  l.logger(),
		Pool: pool,
		Subscribe: func(ctx context.Context, conn *pgx.Conn) error {
			pid.Store(conn.PgConn().PID())
			_, err := conn.Exec(ctx, "LISTEN "+channel)
			return err
		},
		Wants:      wants,
		Wake:       wake,
		Retry:      20 * time.Millisecond,
		Subscribed: func() { subscribed <- struct{}{} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		ln.Run(ctx)
		close(done)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	waitFor(t, subscribed, "subscription")
	waitFor(t, wake, "wake-up after subscribing")
	return pool, wake, pid, subscribed, stop
}

func waitFor(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

func notify(t *testing.T, pool *pgxpool.Pool, payload string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

// The loop is woken by the notifications it wants, not by the others.
func TestListenerWakesOnWantedNotifications(t *testing.T) {
	var l logs
	pool, wake, _, _, _ := listening(t, &l, func(p string) bool { return p == "mine" })
	notify(t, pool, "other")
	select {
	case <-wake:
		t.Fatal("woken by a notification it does not want")
	case <-time.After(200 * time.Millisecond):
	}
	notify(t, pool, "mine")
	waitFor(t, wake, "wake-up on a wanted notification")
}

// A lost session is logged and replaced, and the new one wakes the loop for
// what it missed meanwhile.
func TestListenerReconnects(t *testing.T) {
	var l logs
	pool, wake, pid, subscribed, stop := listening(t, &l, nil)
	first := pid.Load()
	if _, err := pool.Exec(t.Context(), "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, subscribed, "new subscription after the session was lost")
	waitFor(t, wake, "wake-up after subscribing again")
	if pid.Load() == first {
		t.Fatal("the new session is the old one")
	}
	if n := l.count(`level=WARN msg="pginbox worker: LISTEN connection lost, polling until it is back"`); n != 1 {
		t.Fatalf("lost session logged %d times, want 1:\n%s", n, l.buf.String())
	}
	notify(t, pool, "anything")
	waitFor(t, wake, "wake-up on the new session")
	stop()
	if n := l.count("LISTEN connection lost"); n != 1 {
		t.Fatalf("stopping was logged as a lost session:\n%s", l.buf.String())
	}
}

// A Listener's session is taken out of the pool, so the Listener closes it
// when it stops.
func TestListenerClosesItsSession(t *testing.T) {
	var l logs
	pool, _, pid, _, stop := listening(t, &l, nil)
	stop()
	var alive bool
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", pid.Load()).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if alive {
		t.Fatal("the listening session outlived the Listener")
	}
}
