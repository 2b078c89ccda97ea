//go:build unix

package relaytest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/childtest"
	"github.com/pginbox/pginbox/outbox"
)

// envDSN passes the outbox database to the crash child.
const envDSN = "PGINBOX_PUBLISHER_CHILD_DSN"

// ChildDSN is the outbox database of a crash child, or "" when the test is
// not running as one (it should skip then).
func ChildDSN() string { return os.Getenv(envDSN) }

// RunChild is the crash child's body: a relay on dsn publishing through pub
// that, after its first Publish call delivered everything, reports
// "published N" and stops before marking, to be killed there.
func RunChild(t testing.TB, dsn string, pub outbox.Publisher) {
	childtest.ExitWithParent()
	pool := Pool(t, dsn)
	stall := publisherFunc(func(ctx context.Context, msgs []outbox.Message) []error {
		errs := pub.Publish(ctx, msgs)
		for _, err := range errs {
			if err != nil {
				return errs // not the crash point: let the relay retry
			}
		}
		childtest.Mark("published %d", len(msgs))
		for {
			time.Sleep(time.Hour) // the parent kills us here
		}
	})
	r := Relay(t, pool, stall, slog.New(slog.DiscardHandler))
	n, err := r.Drain(context.Background())
	t.Fatalf("Drain returned (%d, %v) without reaching the crash point", n, err)
}

// Crash runs test (a test function calling RunChild) in a child process on
// pool's database (dsn), SIGKILLs it once it published, and returns how
// many events it published without marking. Those are PUBLISHING until the
// lease expires, which Crash makes happen now; pub (a fresh relay's
// publisher) then republishes them with the rest. env is passed to the
// child.
func Crash(t testing.TB, pool *pgxpool.Pool, dsn, test string, pub outbox.Publisher, env ...string) (unmarked int) {
	t.Helper()
	child := childtest.Start(t, test, append(env, envDSN+"="+dsn)...)
	m := child.Marker(t)
	if _, err := fmt.Sscanf(m, "published %d", &unmarked); err != nil {
		t.Fatalf("crash child: marker %q: %v", m, err)
	}
	child.Kill(t)
	ctx := context.Background()
	var pending int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_outbox WHERE status = 'PUBLISHING'").Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending < unmarked {
		t.Fatalf("crash child published %d, but only %d events are PUBLISHING: something marked them", unmarked, pending)
	}
	// Another relay takes over once the lease expired: expire it now.
	if _, err := pool.Exec(ctx, "UPDATE pginbox_outbox SET lease_expires_at = now() - interval '1 second' WHERE status = 'PUBLISHING'"); err != nil {
		t.Fatal(err)
	}
	r := Relay(t, pool, pub, slog.New(slog.DiscardHandler))
	if _, err := r.RecoverExpired(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	return unmarked
}

type publisherFunc func(ctx context.Context, msgs []outbox.Message) []error

func (f publisherFunc) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return f(ctx, msgs)
}
