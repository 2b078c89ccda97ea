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
	"github.com/pginbox/pginbox/internal/testkit"
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
	testkit.WaitFor(t, l.subscribed, 10*time.Second, "subscription")
	if reportMissed {
		testkit.WaitFor(t, l.missed, 10*time.Second, "missed notifications reported after subscribing")
	} else {
		testkit.WaitFor(t, l.wake, 10*time.Second, "wake-up after subscribing")
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

// With Notified, the loop is woken by the notifications it wants only.
func TestListenerWakesOnWantedNotifications(t *testing.T) {
	var logged records
	seen := make(chan string, 10) // every notification, wanted or not
	l := listen(t, &logged, func(consumer string) bool {
		seen <- consumer
		return consumer == "billing"
	}, false)
	l.notify(t, "shipping")
	// Notifications are handled in order: once the next one is seen,
	// shipping's wake-up, if there was one, is in.
	l.notify(t, "marker")
	testkit.WaitMatch(t, seen, 10*time.Second, func(c string) bool { return c == "marker" }, "the notification after shipping's")
	select {
	case <-l.wake:
		t.Fatal("woken by a notification it does not want")
	default:
	}
	l.notify(t, "billing")
	testkit.WaitFor(t, l.wake, 10*time.Second, "wake-up on a wanted notification")
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
	testkit.WaitFor(t, l.subscribed, 10*time.Second, "new subscription after the session was lost")
	testkit.WaitFor(t, l.wake, 10*time.Second, "wake-up after subscribing again")
	if l.session(t) == first {
		t.Fatal("the new session is the old one")
	}
	if n := logged.count(slog.LevelWarn, lostMsg); n != 1 {
		t.Fatalf("lost session logged %d times, want 1", n)
	}
	l.notify(t, "anything")
	testkit.WaitFor(t, l.wake, 10*time.Second, "wake-up on the new session")
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
	testkit.Eventually(t, 10*time.Second, func() bool { return l.session(t) == 0 }, "the listening session to end with the Listener")
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
