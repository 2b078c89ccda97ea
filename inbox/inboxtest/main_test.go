package inboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// migrateCalls counts runs of the application migration registered in TestMain.
var migrateCalls atomic.Int32

// Environment variables for re-running this test binary as a child process.
const (
	// envReport names a file to which tests append the databases they used,
	// when this binary runs as the external-mode child of TestExternalMode.
	envReport = "INBOXTEST_TEST_REPORT"
	// envFailMigrate makes the application's migration fail.
	envFailMigrate = "INBOXTEST_TEST_FAIL_MIGRATE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envFailMigrate) != "" {
		inboxtest.SetMigrate(func(context.Context, string) error { return errors.New("widgets: syntax error at line 3") })
	} else {
		inboxtest.SetMigrate(migrateWidgets)
	}
	if dir := os.Getenv(envCitusBinDir); dir != "" {
		inboxtest.SetCitusBinDir(dir)
	}
	inboxtest.Main(m)
}

// runChild re-runs the tests of this binary that match run in a child process
// with extra environment variables, and returns its combined output.
func runChild(t *testing.T, run string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// migrateWidgets is an application's migration. It runs after pginbox's
// schema, and fails if that is not there yet.
func migrateWidgets(ctx context.Context, dsn string) error {
	migrateCalls.Add(1)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var pginbox bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pginbox_receipts') IS NOT NULL").Scan(&pginbox); err != nil {
		return err
	}
	if !pginbox {
		return errors.New("the application's migration ran before pginbox's schema")
	}
	_, err = conn.Exec(ctx, `
		CREATE TABLE widgets (id bigint PRIMARY KEY, name text NOT NULL);
		CREATE TABLE app_version (version int NOT NULL);
		INSERT INTO app_version VALUES (7);`)
	return err
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// report appends the current database's name (and extra names) to the report
// file when the test runs as the external-mode child of TestExternalMode.
func report(t *testing.T, conn *pgx.Conn, extra ...string) {
	t.Helper()
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	names := append([]string{queryString(t, conn, "SELECT current_database()")}, extra...)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range names {
		fmt.Fprintln(f, n)
	}
}

// fakeT records failures instead of failing the real test, so a test can
// check that an assertion fails and what it says. Fatalf ends the calling
// goroutine, like testing.T's, so run assertions through fakeT.run.
type fakeT struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs fn on a goroutine with a fakeT wrapping t and returns the
// failure message, "" if fn did not fail.
func failure(t testing.TB, fn func(t testing.TB)) string {
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.msgs, "\n")
}

// consumer is the one consumer the test worker handles.
const consumer = "orders.projection.v1"

// setup returns a pool on a fresh database, a client, and a worker that runs
// fn for consumer's order.created v1 events.
func setup(t *testing.T, fn handler.Func) (*pgxpool.Pool, *inbox.Client, *inbox.Worker) {
	t.Helper()
	pool := inboxtest.Pool(t)
	client, err := inbox.NewClient(pool, inbox.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: consumer, EventType: "order.created", SchemaVersion: 1}, fn); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Concurrency:  2,
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool, client, w
}

// identity is the identity of message id for consumer.
func identity(consumer, id string) inbox.Identity {
	return inbox.Identity{Scope: inbox.Global(), Source: "test", Consumer: consumer, MessageID: id}
}

// accept accepts message id for the worker's consumer.
func accept(t *testing.T, c *inbox.Client, id string) inbox.ID {
	t.Helper()
	return acceptFor(t, c, identity(consumer, id))
}

func acceptFor(t *testing.T, c *inbox.Client, id inbox.Identity) inbox.ID {
	t.Helper()
	res, err := c.Accept(context.Background(), inbox.Message{
		Identity:      id,
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       map[string]string{"orderId": id.MessageID},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func ok(context.Context, *handler.Msg) error { return nil }
