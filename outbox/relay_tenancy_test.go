package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

// logLines is a slog.Handler that keeps the messages logged.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }
func (l *logLines) logged(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.msgs, func(m string) bool { return strings.Contains(m, s) })
}

// A relay on a role without BYPASSRLS works while tenancy is off. Enabled
// under it, the relay's claims find nothing: the running relay logs an error
// saying so instead of idling in silence, and a relay starting or draining on
// that role is refused with inbox.ErrTenancyRestricted.
func TestRelayReportsARoleRowSecurityRestricts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	owner := poolOn(t, dsn)
	role := "pginbox_t_relay_" + strings.ToLower(inboxtype.New().String())
	if _, err := owner.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = owner.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = owner.Exec(context.Background(), "DROP ROLE "+role)
	})
	stmts, err := schema.GrantStatements(role, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := owner.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	app, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)

	logs := &logLines{}
	pub := &recorder{}
	r := newRelay(t, app, pub, outbox.RelayConfig{PollInterval: 100 * time.Millisecond, PollOnly: true, Logger: slog.New(logs)})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	emit(t, app, event("", 1))
	testkit.Eventually(t, 15*time.Second, func() bool { return len(pub.published()) == 1 }, "the event to be published")

	if err := schema.EnableTenancy(ctx, owner); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		return logs.logged("claims find nothing because row-level security now restricts the pool's role")
	}, "the restriction to be logged")
	other := newRelay(t, app, pub, outbox.RelayConfig{PollOnly: true})
	if err := other.Start(ctx); !errors.Is(err, inbox.ErrTenancyRestricted) || !strings.Contains(err.Error(), "BYPASSRLS") {
		t.Errorf("Start = %v, want ErrTenancyRestricted naming BYPASSRLS", err)
	}
	if _, err := other.Drain(ctx); !errors.Is(err, inbox.ErrTenancyRestricted) {
		t.Errorf("Drain = %v, want ErrTenancyRestricted", err)
	}

	if err := schema.DisableTenancy(ctx, owner); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		return logs.logged("row-level security no longer restricts the pool's role")
	}, "the end of the restriction to be logged")
}
