package drillkit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/schema"
)

// The application's side of a drill database.
const (
	// AppRole is the application's login role: not a superuser, so
	// max_connections binds it as it binds a real service.
	AppRole = "drill_app"
	// Database is the drill's database, owned by AppRole.
	Database = "drill"
)

// Prepare creates AppRole and Database on the server of adminDSN (a
// superuser connection), applies pginbox's schema as AppRole and creates the
// business table. It returns AppRole's connection string for Database.
func Prepare(ctx context.Context, adminDSN string) (string, error) {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("drillkit: %w", err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"CREATE ROLE " + AppRole + " LOGIN",
		"CREATE DATABASE " + Database + " OWNER " + AppRole,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return "", fmt.Errorf("drillkit: %s: %w", sql, err)
		}
	}
	dsn, err := AppDSN(adminDSN)
	if err != nil {
		return "", err
	}
	if err := schema.UpDSN(ctx, dsn); err != nil {
		return "", fmt.Errorf("drillkit: migrating: %w", err)
	}
	app, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("drillkit: %w", err)
	}
	defer app.Close(context.Background())
	if err := CreateEffects(ctx, app); err != nil {
		return "", err
	}
	return dsn, nil
}

// AppDSN is adminDSN with AppRole's user and Database. A multi-host DSN stays
// multi-host.
func AppDSN(adminDSN string) (string, error) {
	if _, err := pgconn.ParseConfig(adminDSN); err != nil {
		return "", fmt.Errorf("drillkit: %w", err)
	}
	// Later keywords win in a keyword/value string.
	return adminDSN + " user=" + AppRole + " dbname=" + Database, nil
}
