package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
)

// envDatabaseURL is read when --database-url is not given.
const envDatabaseURL = "DATABASE_URL"

// dbFlags are the connection flags of every command that talks to PostgreSQL.
type dbFlags struct {
	url string
}

func (d *dbFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&d.url, "database-url", "", "PostgreSQL connection string, URL or key=value `DSN` (default $"+envDatabaseURL+")")
}

// dsn returns the connection string from the flag or the environment.
func (d *dbFlags) dsn(e *env) (string, error) {
	if d.url != "" {
		return d.url, nil
	}
	if v := e.getenv(envDatabaseURL); v != "" {
		return v, nil
	}
	return "", usagef("no database: pass --database-url or set %s (for example postgres://app@localhost:5432/app)", envDatabaseURL)
}

// connect opens a small pool and checks that the server answers and, when
// checkSchema is set, that pginbox's schema is at the version this build needs.
func (d *dbFlags) connect(ctx context.Context, e *env, checkSchema bool) (*pgxpool.Pool, error) {
	dsn, err := d.dsn(e)
	if err != nil {
		return nil, err
	}
	return openPool(ctx, dsn, 4, checkSchema)
}

func openPool(ctx context.Context, dsn string, maxConns int32, checkSchema bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors may echo the DSN, password included: name the problem only.
		return nil, usagef("the database URL is not a valid PostgreSQL connection string (URL or key=value); check --database-url or $%s", envDatabaseURL)
	}
	cfg.MaxConns = maxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot connect to PostgreSQL at %s (check --database-url or $%s and that the server is running): %w",
			describeTarget(cfg), envDatabaseURL, err)
	}
	if checkSchema {
		if err := schema.Check(ctx, pool); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// describeTarget names the server and database without the password.
func describeTarget(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	host := c.Host
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("socket %s/.s.PGSQL.%d, database %q", host, c.Port, c.Database)
	}
	return fmt.Sprintf("%s:%d, database %q", host, c.Port, c.Database)
}

// scopeFlags choose the admin view: one tenant, the global scope, or (by
// default) every scope.
type scopeFlags struct {
	tenant string
	global bool
}

func (s *scopeFlags) add(fs *flag.FlagSet) {
	// An empty --tenant must not silently widen to every scope.
	fs.Func("tenant", "only the receipts of tenant `ID` (default: every scope)", func(v string) error {
		if v == "" {
			return errors.New("empty tenant ID")
		}
		s.tenant = v
		return nil
	})
	fs.BoolVar(&s.global, "global", false, "only global-scope receipts (default: every scope)")
}

func (s *scopeFlags) check() error {
	if s.tenant != "" && s.global {
		return usagef("--tenant and --global exclude each other")
	}
	return nil
}

func (s *scopeFlags) view(admin *inbox.Admin) *inbox.AdminView {
	switch {
	case s.tenant != "":
		return admin.ForTenant(s.tenant)
	case s.global:
		return admin.Global()
	default:
		return admin.Operator()
	}
}

// adminFor connects, checks the schema and returns the chosen view. Logs of
// the admin API are not shown: the commands print their own results.
func adminFor(ctx context.Context, e *env, d *dbFlags, s *scopeFlags) (*inbox.AdminView, func(), error) {
	if err := s.check(); err != nil {
		return nil, nil, err // before connecting
	}
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return nil, nil, err
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: discardLogger})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s.view(admin), pool.Close, nil
}

// parseID parses a receipt ID (ULID or UUID form) from the command line.
func parseID(s string) (inbox.ID, error) {
	var id inbox.ID
	if err := id.UnmarshalText([]byte(s)); err != nil {
		return id, usagef("%q is not a receipt ID: want a 26-character ULID (as `inbox list` prints) or a UUID", s)
	}
	return id, nil
}

// parseAge parses a retention period: a Go duration (720h, 90m) or whole days
// (30d).
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && fmt.Sprint(n) == days && n >= 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration like 720h, 90m or 30d")
	}
	return d, nil
}

// parseTime accepts RFC 3339 (2024-05-01T00:00:00Z), a date (2024-05-01, UTC)
// or an age relative to now (24h, 7d: that long ago).
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or an age (24h, 7d)")
}

// changeFlags are the flags of an audited change (requeue, replay).
type changeFlags struct {
	version int64
	reason  string
	actor   string
}

func (c *changeFlags) add(fs *flag.FlagSet) {
	fs.Int64Var(&c.version, "version", 0, "the receipt's current `N`, as `inbox show` prints it (required)")
	fs.StringVar(&c.reason, "reason", "", "why, for the audit trail (required)")
	fs.StringVar(&c.actor, "actor", "", "who, for the audit trail (default $USER)")
}

func (c *changeFlags) params(e *env) (inbox.ChangeParams, error) {
	if c.version < 1 {
		return inbox.ChangeParams{}, usagef("--version is required: the version `inbox show` prints, so a receipt that changed meanwhile is not touched")
	}
	if strings.TrimSpace(c.reason) == "" {
		return inbox.ChangeParams{}, usagef("--reason is required: say why, for the audit trail")
	}
	actor := c.actor
	for _, v := range []string{"USER", "LOGNAME"} {
		if actor == "" {
			actor = e.getenv(v)
		}
	}
	if actor == "" {
		return inbox.ChangeParams{}, usagef("--actor is required ($USER is not set): say who, for the audit trail")
	}
	return inbox.ChangeParams{ExpectedVersion: c.version, Actor: actor, Reason: c.reason}, nil
}
