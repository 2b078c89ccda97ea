package historycheck

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/faultproxy"
)

// historySeconds is how long a history runs: HISTORY_SECONDS, or 5.
func historySeconds() int {
	seconds := 5
	if s := os.Getenv("HISTORY_SECONDS"); s != "" {
		fmt.Sscan(s, &seconds)
	}
	return seconds
}

// seedReceipts accepts one global receipt per consumer (straight through the
// statement, to start from known rows) and returns their IDs with the
// operator's view.
func seedReceipts(t *testing.T, ctx context.Context, pool *pgxpool.Pool, consumers []string, maxAttempts int32) ([]inbox.ID, *inbox.AdminView) {
	t.Helper()
	ids := make([]inbox.ID, len(consumers))
	payload := `{"n":1}`
	for i, c := range consumers {
		ids[i] = inboxtype.New()
		fp := sha256.Sum256([]byte{byte(i)})
		if _, err := db.New(pool).ReceiptAccept(ctx, db.ReceiptAcceptParams{
			ID: ids[i], ScopeKind: "global", Source: "history", Consumer: c, MessageID: fmt.Sprint(i),
			EventType: "e", SchemaVersion: 1, Fingerprint: fp[:], Payload: &payload, Metadata: "{}", MaxAttempts: maxAttempts,
		}); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return ids, admin.Operator()
}

// proxiedApp is the application_name of the clients' sessions (through the
// proxy), so the fault injector kills only those.
const proxiedApp = "pginbox-history-client"

// proxiedPools returns, on a fresh migrated database, a pool of 9
// connections through a TCP proxy that can cut them (the clients'), a direct
// pool (the checker's), and the proxy.
func proxiedPools(t *testing.T) (clients, direct *pgxpool.Pool, p *faultproxy.Proxy) {
	t.Helper()
	return proxiedPoolsOn(t, inboxtest.Database(t))
}

// proxiedPoolsOn is proxiedPools on the migrated database dsn names.
func proxiedPoolsOn(t *testing.T, dsn string) (clients, direct *pgxpool.Pool, p *faultproxy.Proxy) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, address := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	if p, err = faultproxy.New(network, address); err != nil {
		t.Fatal(err)
	}
	// Registered before the pools, so it closes after them.
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	open := func(configure func(*pgxpool.Config)) *pgxpool.Pool {
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		configure(pc)
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	clients = open(func(c *pgxpool.Config) {
		c.MaxConns = 9
		throughProxy(c, p.Port())
	})
	direct = open(func(*pgxpool.Config) {})
	return clients, direct, p
}

// throughProxy points c at the fault proxy on port, under the clients'
// application_name: the fault injector kills and cuts these sessions.
func throughProxy(c *pgxpool.Config, port uint16) {
	c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Fallbacks = "127.0.0.1", port, nil
	c.ConnConfig.RuntimeParams["application_name"] = proxiedApp
	c.ConnConfig.ConnectTimeout = 5 * time.Second
}
