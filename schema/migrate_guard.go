package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrMigrateRestricted matches the error of a migration run on a role that
// row-level security restricts: the migration would read and rewrite only
// the rows the role's (empty) scope shows, and silently miss the rest.
var ErrMigrateRestricted = errors.New("pginbox: row-level security restricts the role running the migration")

// checkRowSecurity refuses to migrate when row-level security is active on
// one of pginbox's tables for the role the migrator connects as. The tables'
// owner is held to the policies too once tenancy is enabled (FORCE).
func (m *Migrator) checkRowSecurity(ctx context.Context) error {
	var role string
	var owner bool
	var tables []string
	rows, err := m.db.QueryContext(ctx, `
		SELECT current_user, pg_has_role(c.relowner, 'USAGE'), t
		FROM unnest($1::text[]) AS t
		JOIN pg_catalog.pg_class c ON c.oid = to_regclass(t)
		WHERE row_security_active(c.oid)`, TenancyTables)
	if err != nil {
		return fmt.Errorf("pginbox: checking row-level security before migrating: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		if err := rows.Scan(&role, &owner, &t); err != nil {
			return fmt.Errorf("pginbox: checking row-level security before migrating: %w", err)
		}
		tables = append(tables, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pginbox: checking row-level security before migrating: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	fix := "connect as the role that owns pginbox's tables (the one that ran the first migration), with BYPASSRLS for the upgrade"
	if owner {
		fix = fmt.Sprintf("give role %s BYPASSRLS for the upgrade (as a superuser: ALTER ROLE %s BYPASSRLS; then NOBYPASSRLS once it is done)", role, role)
	}
	return fmt.Errorf("%w: row-level security applies to role %s on %s, so a migration would see none of the tenants' rows: %s; nothing was changed",
		ErrMigrateRestricted, role, strings.Join(tables, ", "), fix)
}

// checkDownGuards runs the guard of every down step in steps before any of
// them runs. A guard is the DO block in a migration's Down section that
// raises an exception when the older schema cannot hold what the database
// stores (v2's audit trail, v5's unpublished events). It must hold at every
// later version too, since it runs at the current one. Each guard runs in a
// transaction that is rolled back.
func (m *Migrator) checkDownGuards(ctx context.Context, steps []Migration) error {
	for i := len(steps) - 1; i >= 0; i-- { // newest first, the order DownTo runs them
		guard, err := downGuard(m.fsys, steps[i].Source)
		if err != nil {
			return err
		}
		if guard == "" {
			continue
		}
		if err := runGuard(ctx, m.db, guard); err != nil {
			return fmt.Errorf("pginbox: migrating: rolling back %s would fail, so nothing was rolled back: %w", steps[i].Source, err)
		}
	}
	return nil
}

func runGuard(ctx context.Context, db *sql.DB, guard string) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL row_security = off"); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, guard)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Hint != "" {
		return fmt.Errorf("%w (%s)", err, pgErr.Hint)
	}
	return err
}

// downGuard returns the guard statements of a migration file's Down
// section: its StatementBegin/StatementEnd blocks that raise an exception.
func downGuard(fsys fs.FS, file string) (string, error) {
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return "", fmt.Errorf("pginbox: reading migration %s: %w", file, err)
	}
	_, down, ok := strings.Cut(string(b), "-- +goose Down")
	if !ok {
		return "", nil
	}
	var guards []string
	for {
		_, rest, ok := strings.Cut(down, "-- +goose StatementBegin")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "-- +goose StatementEnd")
		if !ok {
			return "", fmt.Errorf("pginbox: migration %s: StatementBegin without StatementEnd", file)
		}
		if strings.Contains(block, "RAISE EXCEPTION") {
			guards = append(guards, strings.TrimSpace(block))
		}
		down = after
	}
	return strings.Join(guards, ";\n"), nil
}
