// Package schema owns pginbox's database schema: the embedded goose migrations and
// the API that applies, rolls back and reports them.
//
// pginbox keeps its own goose version table ([VersionTable]) and advisory lock
// ([LockID]), so it never touches an application's goose history and two processes
// migrating at once are serialized. A [Migrator] refuses to run on a role that
// row-level security restricts ([ErrMigrateRestricted]), and checks every down
// step's precondition before it rolls anything back. The same files work with
// the goose CLI:
//
//	goose -dir <module dir>/schema -table pginbox_schema_version postgres "$DATABASE_URL" up
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Version is the schema version this build of pginbox runs against.
const Version int64 = 13

// VersionTable is the goose version table pginbox uses instead of goose_db_version.
const VersionTable = "pginbox_schema_version"

// LockID is the PostgreSQL advisory lock key held while migrating. It differs from
// goose's default key so an application's own migrations never wait on pginbox's.
const LockID int64 = 0x7067696e626f78 // "pginbox" in ASCII

//go:embed *.sql
var migrations embed.FS

// FS returns the embedded migration files (00001_*.sql, 00002_*.sql, ...).
func FS() fs.FS { return migrations }

// ErrNotMigrated reports a database whose pginbox schema is missing or at another
// version than [Version]. The concrete error is a *VersionError.
var ErrNotMigrated = errors.New("pginbox: schema not migrated")

// VersionError names the schema version found and the one this build expects.
// Found is 0 when the schema is absent.
type VersionError struct {
	Expected int64 // Version: what this build runs on
	Found    int64 // the database's version; 0 without a schema
}

func (e *VersionError) Error() string {
	if e.Found == 0 {
		return fmt.Sprintf("pginbox: schema not migrated (expected version %d, found none): run `inbox migrate up`", e.Expected)
	}
	if e.Found < e.Expected {
		return fmt.Sprintf("pginbox: schema not migrated (expected version %d, found %d): run `inbox migrate up`", e.Expected, e.Found)
	}
	return fmt.Sprintf("pginbox: schema version %d is newer than this build supports (%d): upgrade pginbox", e.Found, e.Expected)
}

func (e *VersionError) Is(target error) bool { return target == ErrNotMigrated }

// Querier is satisfied by *pgx.Conn, *pgxpool.Pool and pgx.Tx.
type Querier interface {
	// QueryRow is pgx's QueryRow.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// versionQuery reads goose's current version without creating anything: runtime
// code never creates or alters tables.
const versionQuery = `
SELECT coalesce((
    SELECT v.version_id FROM pginbox_schema_version v
    WHERE v.is_applied ORDER BY v.id DESC LIMIT 1), 0)`

// Check returns nil when the database is at [Version], and a *VersionError
// (matching [ErrNotMigrated]) when it is not.
func Check(ctx context.Context, q Querier) error {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('pginbox_schema_version') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("pginbox: checking schema version: %w", err)
	}
	found := int64(0)
	if exists {
		if err := q.QueryRow(ctx, versionQuery).Scan(&found); err != nil {
			return fmt.Errorf("pginbox: checking schema version: %w", err)
		}
	}
	if found != Version {
		return &VersionError{Expected: Version, Found: found}
	}
	return nil
}

// Migration is the state of one migration file.
type Migration struct {
	Version int64  // the number the file name starts with
	Source  string // file name
	Applied bool   // recorded as applied in pginbox_schema_version
}

// Migrator applies pginbox's migrations to one database.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
	fsys     fs.FS
	citus    bool // the Citus line (NewCitusMigrator)
	locker   *timeoutLocker
	onRetry  func(LockRetry)
	budget   time.Duration // lockRetryBudget; shorter in tests
}

// NewMigrator returns a Migrator for db. Open db with the pgx stdlib driver, for
// example stdlib.OpenDBFromPool(pool) or sql.Open("pgx", dsn).
func NewMigrator(db *sql.DB) (*Migrator, error) {
	return newMigrator(db, migrations, false)
}

func newMigrator(db *sql.DB, fsys fs.FS, citus bool) (*Migrator, error) {
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(LockID),
		lock.WithLockTimeout(1, 600), // wait up to 10 minutes for another migrator
	)
	if err != nil {
		return nil, fmt.Errorf("pginbox: migration lock: %w", err)
	}
	timeouts := &timeoutLocker{SessionLocker: locker}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(timeouts),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("pginbox: loading migrations: %w", err)
	}
	return &Migrator{db: db, provider: p, fsys: fsys, citus: citus, locker: timeouts, budget: lockRetryBudget}, nil
}

// Up applies every pending migration and returns the versions it applied.
// It refuses a role that row-level security restricts ([ErrMigrateRestricted]).
// Workers may keep running: a migration that cannot take its table locks
// soon gives way and runs again ([LockRetry]), and after five minutes
// without progress Up fails with [ErrTablesBusy]. When a migration fails,
// the versions applied before it are returned with the error.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	return m.UpTo(ctx, math.MaxInt64)
}

// UpTo applies pending migrations up to and including version, like [Migrator.Up].
func (m *Migrator) UpTo(ctx context.Context, version int64) ([]int64, error) {
	pending, err := m.pending(ctx, func(s Migration) bool { return !s.Applied && s.Version <= version })
	if err != nil {
		return nil, err
	}
	if err := m.checkLine(ctx); err != nil {
		return nil, err
	}
	if len(pending) == 0 {
		return nil, nil
	}
	if err := m.checkRowSecurity(ctx); err != nil {
		return nil, err
	}
	return m.retryLocks(ctx, "inbox migrate up", func() ([]*goose.MigrationResult, error) {
		return m.provider.UpTo(ctx, version)
	})
}

// DownTo rolls back migrations until the database is at version (0 removes the
// schema entirely) and returns the versions it rolled back. Before it rolls
// back anything it checks every step's precondition (the guard its down
// step starts with, for example v2's refusal to drop the audit trail), so a
// refusal changes nothing. Like [Migrator.Up], a step that cannot take its
// locks gives way and runs again. When a step fails anyway, the versions
// rolled back before it are returned with the error.
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]int64, error) {
	steps, err := m.pending(ctx, func(s Migration) bool { return s.Applied && s.Version > version })
	if err != nil || len(steps) == 0 {
		return nil, err
	}
	if err := m.checkLine(ctx); err != nil {
		return nil, err
	}
	if err := m.checkRowSecurity(ctx); err != nil {
		return nil, err
	}
	if err := m.checkDownGuards(ctx, steps); err != nil {
		return nil, err
	}
	return m.retryLocks(ctx, fmt.Sprintf("inbox migrate down --to %d", version), func() ([]*goose.MigrationResult, error) {
		return m.provider.DownTo(ctx, version)
	})
}

// pending lists the migrations a run would step through.
func (m *Migrator) pending(ctx context.Context, include func(Migration) bool) ([]Migration, error) {
	st, err := m.Status(ctx)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, s := range st {
		if include(s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Current returns the applied version (0 for none).
func (m *Migrator) Current(ctx context.Context) (int64, error) {
	v, err := m.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("pginbox: reading schema version: %w", err)
	}
	return v, nil
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]Migration, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("pginbox: migration status: %w", err)
	}
	out := make([]Migration, 0, len(st))
	for _, s := range st {
		out = append(out, Migration{
			Version: s.Source.Version,
			Source:  s.Source.Path,
			Applied: s.State == goose.StateApplied,
		})
	}
	return out, nil
}

func versions(results []*goose.MigrationResult, err error) ([]int64, error) {
	var partial *goose.PartialError
	if errors.As(err, &partial) {
		results = partial.Applied // goose returns no results with the error
	}
	var out []int64
	for _, r := range results {
		if r.Error == nil {
			out = append(out, r.Source.Version)
		}
	}
	if err != nil {
		return out, fmt.Errorf("pginbox: migrating: %w", err)
	}
	return out, nil
}

// UpDSN opens dsn with the pgx driver and applies every pending migration.
func UpDSN(ctx context.Context, dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("pginbox: opening the database: %w", err)
	}
	defer db.Close()
	m, err := NewMigrator(db)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx)
	return err
}
