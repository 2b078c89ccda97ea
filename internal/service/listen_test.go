package service_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/service"
)

const lostMsg = "pginbox worker: LISTEN connection lost, polling until it is back"

func subscribe(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "LISTEN service_test")
	return err
}

// listening is a running Listener on the channel service_test.
type listening struct {
	pool       *pgxpool.Pool
	wake       chan struct{}
	missed     chan struct{} // signalled by Missed, when the Listener has it
	subscribed chan struct{}
	stop       func()
}

// listen starts a Listener on a new database and returns once it subscribed,
// with its wake-up signal taken (with reportMissed, its Missed signal
// instead).
func listen(t *testing.T, logged *records, wants func(string) bool, reportMissed bool) *listening {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), inboxtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l := &listening{pool: pool, wake: make(chan struct{}, 1), missed: make(chan struct{}, 1), subscribed: make(chan struct{}, 10)}
	ln := &service.Listener{
		Base:       service.Base{Name: "worker", Log: logged.logger()},
		Pool:       pool,
		Subscribe:  subscribe,
		Wake:       l.wake,
		Retry:      20 * time.Millisecond,
		Subscribed: func() { l.subscribed <- struct{}{} },
	}
	if wants != nil {
		ln.Notified = func(payload string) {
			if wants(payload) {
				service.Signal(l.wake)
			}
		}
	}
	if reportMissed {
		ln.Missed = func() { service.Signal(l.missed) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		ln.Run(ctx)
		close(returned)
	}()
	l.stop = func() {
		cancel()
		<-returned
	}
	t.Cleanup(l.stop)
	waitFor(t, l.subscribed, "subscription")
	if reportMissed {
		waitFor(t, l.missed, "missed notifications reported after subscribing")
	} else {
		waitFor(t, l.wake, "wake-up after subscribing")
	}
	return l
}

// session returns the listening session's backend, 0 when there is none.
func (l *listening) session(t *testing.T) uint32 {
	t.Helper()
	var pid uint32
	// The pattern is a parameter, so this statement, the last one of some
	// pool session, does not match it.
	err := l.pool.QueryRow(t.Context(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE $1`, "%LISTEN service_test%").Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func (l *listening) notify(t *testing.T, payload string) {
	t.Helper()
	if _, err := l.pool.Exec(t.Context(), "SELECT pg_notify('service_test', $1)", payload); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// With Notified, the loop is woken by the notifications it wants only.
func TestListenerWakesOnWantedNotifications(t *testing.T) {
	var logged records
	l := listen(t, &logged, func(consumer string) bool { return consumer == "billing" }, false)
	l.notify(t, "shipping")
	select {
	case <-l.wake:
		t.Fatal("woken by a notification it does not want")
	case <-time.After(200 * time.Millisecond):
	}
	l.notify(t, "billing")
	waitFor(t, l.wake, "wake-up on a wanted notification")
}

// A lost session is logged and replaced, and the new one wakes the loop for
// what it missed meanwhile; stopping is not logged as a loss.
func TestListenerReconnects(t *testing.T) {
	var logged records
	l := listen(t, &logged, nil, false)
	first := l.session(t)
	if first == 0 {
		t.Fatal("no listening session")
	}
	if _, err := l.pool.Exec(t.Context(), "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, l.subscribed, "new subscription after the session was lost")
	waitFor(t, l.wake, "wake-up after subscribing again")
	if l.session(t) == first {
		t.Fatal("the new session is the old one")
	}
	if n := logged.count(slog.LevelWarn, lostMsg); n != 1 {
		t.Fatalf("lost session logged %d times, want 1", n)
	}
	l.notify(t, "anything")
	waitFor(t, l.wake, "wake-up on the new session")
	l.stop()
	if n := logged.count(slog.LevelWarn, lostMsg); n != 1 {
		t.Fatal("stopping was logged as a lost session")
	}
}

// The session is taken out of the pool, so the Listener closes it when it
// stops.
func TestListenerClosesItsSession(t *testing.T) {
	var logged records
	l := listen(t, &logged, nil, false)
	if l.session(t) == 0 {
		t.Fatal("no listening session")
	}
	l.stop()
	deadline := time.Now().Add(10 * time.Second)
	for l.session(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the listening session outlived the Listener")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With Missed, a subscription runs it instead of waking the loop: the
// service marks what it may have missed as notified.
func TestListenerReportsMissedNotifications(t *testing.T) {
	var logged records
	l := listen(t, &logged, func(string) bool { return true }, true)
	select {
	case <-l.wake:
		t.Fatal("a subscription woke the loop as a plain wake-up")
	default:
	}
}
