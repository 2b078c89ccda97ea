package schema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TenancyTables are the tables whose rows belong to a scope. Migration 6
// defines a row-level security policy on each; [EnableTenancy] turns them on.
var TenancyTables = []string{"pginbox_receipts", "pginbox_work", "pginbox_audit", "pginbox_outbox"}

// Beginner is satisfied by *pgx.Conn and *pgxpool.Pool.
type Beginner interface {
	// Begin is pgx's Begin.
	Begin(ctx context.Context) (pgx.Tx, error)
}

// EnableTenancy enables and forces row-level security on [TenancyTables] in
// one transaction. From then on a role without BYPASSRLS, the tables' owner
// included, sees and writes only the rows of the scope its transaction set
// (inbox.ApplyScope). Run it as the tables' owner, once the application and
// system roles have their grants ([GrantStatements]).
func EnableTenancy(ctx context.Context, db Beginner) error {
	return alterTenancy(ctx, db, "ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY")
}

// DisableTenancy turns row-level security off on [TenancyTables]: every role
// with table privileges sees every scope again. The policies stay defined.
func DisableTenancy(ctx context.Context, db Beginner) error {
	return alterTenancy(ctx, db, "NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY")
}

// ErrTablesBusy reports that [EnableTenancy] or [DisableTenancy] could not
// lock pginbox's tables: transactions kept them busy through every attempt.
var ErrTablesBusy = errors.New("pginbox: pginbox's tables stayed busy: transactions held them through every attempt; retry in a quieter moment or with the workers stopped (pg_stat_activity shows the long transactions)")

// Switch attempts: each waits at most switchLockWait for the table locks and
// gives up (rather than risk a deadlock that could abort an application's
// transaction), then waits a little longer before the next.
const (
	switchAttempts = 10
	switchLockWait = 200 * time.Millisecond
)

func alterTenancy(ctx context.Context, db Beginner, action string) error {
	var err error
	for attempt := 1; attempt <= switchAttempts; attempt++ {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return alterTenancyTx(ctx, tx, action) })
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "55P03" && pgErr.Code != "40P01") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pginbox: changing row-level security: %w", ctx.Err())
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w (%d attempts, last: %w)", ErrTablesBusy, switchAttempts, err)
}

// alterTenancyTx takes every table's lock in one statement before changing
// any: ALTER TABLE one table at a time would hold the first lock while waiting
// for the next, and a worker holding the second and wanting the first is a
// deadlock. The lock wait is bounded so that this transaction, not the
// application's, is the one that gives way.
func alterTenancyTx(ctx context.Context, tx pgx.Tx, action string) error {
	if err := Check(ctx, tx); err != nil {
		return err
	}
	var prior string
	if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&prior); err != nil {
		return fmt.Errorf("pginbox: reading lock_timeout: %w", err)
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", fmt.Sprintf("%dms", switchLockWait.Milliseconds())); err != nil {
		return fmt.Errorf("pginbox: setting lock_timeout: %w", err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(TenancyTables, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return tenancyErr("locking pginbox's tables", err)
	}
	// A caller's own transaction (db may be a pgx.Tx) keeps its setting.
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", prior); err != nil {
		return fmt.Errorf("pginbox: restoring lock_timeout: %w", err)
	}
	for _, t := range TenancyTables {
		if _, err := tx.Exec(ctx, "ALTER TABLE "+t+" "+action); err != nil {
			return tenancyErr("changing row-level security on "+t, err)
		}
	}
	return nil
}

func tenancyErr(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("pginbox: %s: %w: connect as the role that owns pginbox's tables (the one that ran `inbox migrate up`)", what, err)
	}
	return fmt.Errorf("pginbox: %s: %w", what, err)
}

// TableTenancy is the row-level security state of one table.
type TableTenancy struct {
	Table   string // one of TenancyTables
	Enabled bool   // ENABLE ROW LEVEL SECURITY
	Forced  bool   // FORCE ROW LEVEL SECURITY: the owner is held to the policies too
}

// TenancyStatus reports the row-level security state of [TenancyTables].
func TenancyStatus(ctx context.Context, q Querier) ([]TableTenancy, error) {
	out := make([]TableTenancy, 0, len(TenancyTables))
	for _, t := range TenancyTables {
		st := TableTenancy{Table: t}
		err := q.QueryRow(ctx,
			`SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = to_regclass($1)`, t,
		).Scan(&st.Enabled, &st.Forced)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, &VersionError{Expected: Version}
		}
		if err != nil {
			return nil, fmt.Errorf("pginbox: reading row-level security of %s: %w", t, err)
		}
		out = append(out, st)
	}
	return out, nil
}

var roleName = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

// ErrBadRoleName reports a role name GrantStatements will not put into SQL.
var ErrBadRoleName = errors.New("pginbox: role name must be a lower-case SQL identifier (letters, digits, _ and $, not starting with a digit)")

// GrantStatements returns the SQL that lets role use pginbox's tables.
//
// An application role (system false) gets table privileges only: under
// row-level security it acts inside the scope its transaction set, and it
// must not own the tables or have BYPASSRLS. A system role (system true) is
// for the parts that work across tenants (the worker's claims, heartbeats and
// recovery, purge, the outbox relay, operator views): it also gets BYPASSRLS,
// which only a superuser can grant.
//
// Either role may read and append to the audit trail, never change it: the
// statements revoke UPDATE, DELETE and TRUNCATE on pginbox_audit, so running
// them again on a role granted by an older release takes those away.
func GrantStatements(role string, system bool) ([]string, error) {
	if !roleName.MatchString(role) {
		return nil, fmt.Errorf("%w: %q", ErrBadRoleName, role)
	}
	stmts := []string{
		"GRANT SELECT ON pginbox_schema_version TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON pginbox_receipts, pginbox_work, pginbox_outbox TO " + role,
		"REVOKE UPDATE, DELETE, TRUNCATE ON pginbox_audit FROM " + role,
		"GRANT SELECT, INSERT ON pginbox_audit TO " + role,
		"GRANT SELECT ON pginbox_receipts_live TO " + role,
	}
	if system {
		stmts = append(stmts, "ALTER ROLE "+role+" BYPASSRLS")
	} else {
		stmts = append(stmts, "ALTER ROLE "+role+" NOBYPASSRLS")
	}
	return stmts, nil
}
