package inboxtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/schema"
)

// template builds the template database once per test binary: pginbox's
// schema, then the SetMigrate function. Every Database is a clone of it.
func (e *env) template() (string, error) {
	e.tmplOnce.Do(func() {
		migrateMu.Lock()
		appMigrate := migrate
		tmplFixed = true
		migrateMu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		name := "pginbox_tmpl_" + randomHex(8)
		if err := e.createDatabase(ctx, name, ""); err != nil {
			e.tmplErr = err
			return
		}
		e.tmplErr = e.migrateTemplate(ctx, name, appMigrate)
		if e.tmplErr != nil {
			e.dropDatabase(ctx, name)
			return
		}
		e.tmplName = name
	})
	return e.tmplName, e.tmplErr
}

func (e *env) migrateTemplate(ctx context.Context, name string, appMigrate MigrateFunc) error {
	dsn := e.dsnFor(name)
	if err := schema.UpDSN(ctx, dsn); err != nil {
		return fmt.Errorf("inboxtest: applying pginbox's schema to the template database %s: %w", name, err)
	}
	if appMigrate != nil {
		if err := appMigrate(ctx, dsn); err != nil {
			return fmt.Errorf("inboxtest: the SetMigrate function failed on the template database %s: %w", name, err)
		}
	}
	// Clones fail while anyone is connected to the template. Shut it to new
	// connections and end any the migrate function left open (a pool it did
	// not close, say).
	if err := e.exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("inboxtest: closing template database %s: %w", name, err)
	}
	if err := e.exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
		return fmt.Errorf("inboxtest: closing template database %s: %w", name, err)
	}
	return nil
}
