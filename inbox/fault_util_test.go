package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/testkit"
)

// Helpers of the TCP fault tests (fault_*_test.go): a real TCP proxy between
// pgx and the test cluster (which listens on a unix socket only), and ways to
// tell when the server has finished what the faults left behind.

// proxiedApp is the application_name of every connection made through the
// proxy, so the tests can find those sessions on the server.
const proxiedApp = "pginbox-fault-proxy"

// faultDB returns a fresh migrated database, a proxy in front of its server and
// a direct (unproxied) pool for setup and checks.
func faultDB(t testing.TB) (*faultproxy.Proxy, string, *pgxpool.Pool) {
	t.Helper()
	dsn := inboxtest.Database(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, address := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	p, err := faultproxy.New(network, address)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before any pool on the proxy, so it runs after they close.
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	return p, dsn, poolFor(t, dsn)
}

// proxyPool is a pool on dsn whose connections go through p: host=127.0.0.1,
// port=p.Port(). Each configure function runs after that.
func proxyPool(t testing.TB, p *faultproxy.Proxy, dsn string, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	return poolFor(t, dsn, append([]func(*pgxpool.Config){func(c *pgxpool.Config) {
		c.ConnConfig.Host = "127.0.0.1"
		c.ConnConfig.Port = p.Port()
		c.ConnConfig.Fallbacks = nil
		c.ConnConfig.RuntimeParams["application_name"] = proxiedApp
		// Bound a connect that meets a fault, so that no pool keeps a
		// half-open connection attempt past the test.
		c.ConnConfig.ConnectTimeout = 5 * time.Second
	}}, configure...)...)
}

// noPing stops the pool from pinging connections idle for over a second
// before handing them out, so a test controls exactly which round trips hit
// a fault.
func noPing(c *pgxpool.Config) {
	c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
}

// sessions counts the server sessions with application_name app: all of
// them, and those not idle (running a statement or inside a transaction).
func sessions(t testing.TB, direct *pgxpool.Pool, app string) (total, busy int) {
	t.Helper()
	err := direct.QueryRow(context.Background(), `
		SELECT count(*), count(*) FILTER (WHERE state IS DISTINCT FROM 'idle')
		FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`, app).
		Scan(&total, &busy)
	if err != nil {
		t.Fatal(err)
	}
	return total, busy
}

// waitSettled waits until the proxy holds nothing and, for a quarter second in
// a row, no session named app runs a statement or a transaction: whatever a
// fault left in flight has committed or rolled back by then. With gone, it
// also waits until no such session exists at all.
func waitSettled(t testing.TB, p *faultproxy.Proxy, direct *pgxpool.Pool, app string, gone bool) {
	t.Helper()
	quietSince := time.Time{}
	testkit.Eventually(t, 15*time.Second, func() bool {
		total, busy := sessions(t, direct, app)
		if (p != nil && p.Held() > 0) || busy > 0 || (gone && total > 0) {
			quietSince = time.Time{}
			return false
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
		}
		return time.Since(quietSince) >= 250*time.Millisecond
	}, "sessions %s to settle", app)
}

// receiptID is the ID of the receipt of message id, and whether it exists.
func receiptID(t testing.TB, direct *pgxpool.Pool, messageID string) (inbox.ID, bool) {
	t.Helper()
	var id inbox.ID
	n := 0
	rows, err := direct.Query(context.Background(), "SELECT id FROM pginbox_receipts_live WHERE message_id = $1", messageID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n > 1 {
		t.Fatalf("message %s has %d receipts", messageID, n)
	}
	return id, n == 1
}

// receiptIDs maps message ID to receipt ID over the whole table, failing on a
// message with more than one receipt.
func receiptIDs(t testing.TB, direct *pgxpool.Pool) map[string]inbox.ID {
	t.Helper()
	rows, err := direct.Query(context.Background(), "SELECT message_id, id FROM pginbox_receipts_live")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]inbox.ID{}
	for rows.Next() {
		var m string
		var id inbox.ID
		if err := rows.Scan(&m, &id); err != nil {
			t.Fatal(err)
		}
		if _, dup := ids[m]; dup {
			t.Fatalf("message %s has more than one receipt", m)
		}
		ids[m] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func faultMsgID(i int) string { return fmt.Sprintf("fault-%05d", i) }

func faultMsg(i int) inbox.Message {
	return orderMsg(faultMsgID(i), map[string]any{"orderId": faultMsgID(i), "n": i})
}

// redeliver accepts msg until it is acknowledged, as a transport redelivers a
// delivery it did not ack. Every failed try must say Retry. It fails the test
// after tries attempts.
func redeliver(t testing.TB, c *inbox.Client, msg inbox.Message, tries int) (inbox.AcceptResult, int) {
	t.Helper()
	var lastErr error
	for n := 1; n <= tries; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.Accept(ctx, msg)
		cancel()
		if err == nil {
			return res, n
		}
		if a := inbox.ActionFor(err); a != inbox.ActionRetry {
			t.Fatalf("redelivery of %s: action %v for %v, want retry", msg.MessageID, a, err)
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond) // a transport's redelivery delay, bounded by tries, not time
	}
	t.Fatalf("redelivery of %s still failing after %d tries: %v", msg.MessageID, tries, lastErr)
	return inbox.AcceptResult{}, 0
}

// quietLogger logs warnings and errors only: fault tests make workers log a lot.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
