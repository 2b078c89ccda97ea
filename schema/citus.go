package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// The Citus migration line shares the single-node files up to version 6 and
// has a twin of its own for each later version (citus/000NN_*.sql): the same
// changes in DDL Citus accepts, then the tables distributed by scope.
//
//go:embed citus/*.sql
var citusMigrations embed.FS

// CitusFS returns the migration files of the Citus line: the single-node
// files of versions 1 to 6, citus/00007_citus.sql, then the single-node
// files of version 8 on (their DDL runs on Citus as it is).
func CitusFS() fs.FS { return citusLine{} }

// citusLine overlays the Citus twins on the single-node files.
type citusLine struct{}

func (citusLine) Open(name string) (fs.File, error) {
	if strings.HasPrefix(name, "citus/") {
		return citusMigrations.Open(name)
	}
	return migrations.Open(name)
}

// Glob lists the single-node files matching pattern that have no Citus
// twin, and the twins (as citus/<name>).
func (citusLine) Glob(pattern string) ([]string, error) {
	twins, err := fs.Glob(citusMigrations, path.Join("citus", pattern))
	if err != nil {
		return nil, err
	}
	twinned := map[int64]bool{}
	for _, f := range twins {
		if v, err := goose.NumericComponent(path.Base(f)); err == nil {
			twinned[v] = true
		}
	}
	shared, err := fs.Glob(migrations, pattern)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range shared {
		if v, err := goose.NumericComponent(f); err == nil && twinned[v] {
			continue
		}
		out = append(out, f)
	}
	out = append(out, twins...)
	// In version order, as goose applies them.
	sort.SliceStable(out, func(i, j int) bool {
		vi, _ := goose.NumericComponent(path.Base(out[i]))
		vj, _ := goose.NumericComponent(path.Base(out[j]))
		return vi < vj
	})
	return out, nil
}

// CitusColocateSetting is the connection setting the Citus line's version 7
// reads: the table whose colocation group pginbox's tables join. See
// [CitusOptions.ColocateWith].
const CitusColocateSetting = "pginbox.citus_colocate_with"

// CitusOptions configures [MigrateCitus].
type CitusOptions struct {
	// ColocateWith names an application table already distributed by a text
	// tenant column (create_distributed_table('orders', 'tenant_id')):
	// pginbox's tables join its colocation group, so one tenant's business
	// rows and pginbox rows share a node. The tenant column's values must be
	// pginbox's scope IDs (the tenant ID passed to inbox.Tenant).
	//
	// Defaults to "": Citus's default colocation group for text distribution
	// columns, which application tables distributed later join with
	// colocate_with => 'pginbox_receipts' (or with the default colocation,
	// when their shard count is the default).
	ColocateWith string
}

// ErrMigrationLine reports a migrator of one line (single-node or Citus) run
// on a database that belongs to the other, or a Citus line run on a database
// without Citus.
var ErrMigrationLine = errors.New("pginbox: wrong migration line for this database")

// NewCitusMigrator returns a Migrator of the Citus line ([CitusFS]) for db,
// which must reach a Citus coordinator with the citus extension created and
// its workers added. Open db as for [NewMigrator]. Version 7 of the line
// distributes pginbox's tables; to colocate them with an application table,
// set [CitusColocateSetting] on db's connections (pgx.ConnConfig.RuntimeParams)
// or use [MigrateCitus].
func NewCitusMigrator(db *sql.DB) (*Migrator, error) {
	return newMigrator(db, CitusFS(), true)
}

// MigrateCitus opens dsn (a Citus coordinator) and applies every pending
// migration of the Citus line, with opts. It returns the versions applied.
// A single-node deployment uses [UpDSN] (or [NewMigrator]) instead; the two
// lines refuse each other's databases ([ErrMigrationLine]).
func MigrateCitus(ctx context.Context, dsn string, opts CitusOptions) ([]int64, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pginbox: opening the database: %w", err)
	}
	if opts.ColocateWith != "" {
		cfg.RuntimeParams[CitusColocateSetting] = opts.ColocateWith
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	m, err := NewCitusMigrator(db)
	if err != nil {
		return nil, err
	}
	if opts.ColocateWith != "" {
		if err := CheckColocateWith(ctx, db, opts.ColocateWith); err != nil {
			return nil, err
		}
	}
	return m.Up(ctx)
}

// CheckColocateWith returns an error saying why pginbox's tables cannot be
// colocated with table (it is not distributed, or not by a text column), or
// nil. [MigrateCitus] checks it before anything changes.
func CheckColocateWith(ctx context.Context, db *sql.DB, table string) error {
	var kind, colType string
	err := db.QueryRowContext(ctx, `
		SELECT c.citus_table_type, format_type(a.atttypid, a.atttypmod)
		FROM citus_tables c
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.table_name AND a.attname = c.distribution_column
		WHERE c.table_name = to_regclass($1)`, table).Scan(&kind, &colType)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("pginbox: colocating with %q: no distributed table of that name: distribute it first "+
			"(SELECT create_distributed_table('%s', '<tenant column>')) or leave ColocateWith empty", table, table)
	}
	if err != nil {
		return fmt.Errorf("pginbox: colocating with %q: %w", table, err)
	}
	if kind != "distributed" || colType != "text" {
		return fmt.Errorf("pginbox: colocating with %q: it is a %s table distributed by a %s column; pginbox's tables are distributed by a text scope ID, so only a table distributed by a text tenant column can share their shards",
			table, kind, colType)
	}
	return nil
}

// checkLine refuses a migrator of one line on a database of the other.
func (m *Migrator) checkLine(ctx context.Context) error {
	var hasCitus bool
	if err := m.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`).Scan(&hasCitus); err != nil {
		return fmt.Errorf("pginbox: checking for Citus: %w", err)
	}
	if !hasCitus {
		if m.citus {
			return fmt.Errorf("%w: the Citus line needs the citus extension in this database: on the coordinator and every worker "+
				"CREATE EXTENSION citus, then add the workers on the coordinator (SELECT citus_add_node(host, port)); "+
				"for a single PostgreSQL server migrate without --citus", ErrMigrationLine)
		}
		return nil
	}
	var distributed bool
	if err := m.db.QueryRowContext(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('pginbox_receipts'))`).Scan(&distributed); err != nil {
		return fmt.Errorf("pginbox: checking for distributed tables: %w", err)
	}
	if distributed && !m.citus {
		return fmt.Errorf("%w: pginbox's tables here are distributed by Citus: migrate them with the Citus line "+
			"(`inbox migrate ... --citus`, schema.NewCitusMigrator)", ErrMigrationLine)
	}
	if !distributed && m.citus {
		v, err := m.Current(ctx)
		if err != nil {
			return err
		}
		if v >= 7 {
			return fmt.Errorf("%w: pginbox's tables here are local tables at version %d of the single-node line; "+
				"roll them back to version 6 with the single-node line (`inbox migrate down --to 6`), then migrate with --citus", ErrMigrationLine, v)
		}
	}
	return nil
}
