package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
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
			return errors.New("want a tenant ID, not an empty string")
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

// json names the chosen scope for --json output.
func (s *scopeFlags) json() jsonScope {
	switch {
	case s.tenant != "":
		return jsonScope{Kind: string(inbox.ScopeTenant), ID: s.tenant}
	case s.global:
		return jsonScope{Kind: string(inbox.ScopeGlobal)}
	default:
		return jsonScope{Kind: "all"}
	}
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

// changeFlags are the flags of an audited change (requeue, replay).
type changeFlags struct {
	version *numberFlag
	reason  string
	actor   string
}

func (c *changeFlags) add(fs *flag.FlagSet) {
	c.version = numberVar(fs, "version", 0, 1, math.MaxInt64, "the receipt's current version `N`, as `inbox show` prints it (required)")
	c.version.noun = "a receipt version"
	fs.StringVar(&c.reason, "reason", "", fmt.Sprintf("why, for the audit trail: `TEXT` of at most %d bytes (required)", inbox.MaxReasonBytes))
	fs.StringVar(&c.actor, "actor", "", "who, for the audit trail: `NAME` (default $USER, else the process's OS user)")
}

func (c *changeFlags) params(e *env) (inbox.ChangeParams, error) {
	if !c.version.set {
		return inbox.ChangeParams{}, usagef("--version is required: the version `inbox show` prints, so a receipt that changed meanwhile is not touched")
	}
	if strings.TrimSpace(c.reason) == "" {
		return inbox.ChangeParams{}, usagef("--reason is required: say why, for the audit trail")
	}
	actor := c.actor
	if actor == "" {
		actor = e.defaultActor()
	}
	return inbox.ChangeParams{ExpectedVersion: c.version.n, Actor: actor, Reason: c.reason}, nil
}
