package schema

import (
	"database/sql"
	"io/fs"
	"time"
)

// NewMigratorFS is NewMigrator on other migration files: the tests add a
// migration of a later version to pginbox's own.
func NewMigratorFS(db *sql.DB, fsys fs.FS) (*Migrator, error) { return newMigrator(db, fsys, false) }

// SetLockRetryBudget shortens how long m retries a migration that gives way.
func (m *Migrator) SetLockRetryBudget(d time.Duration) { m.budget = d }
