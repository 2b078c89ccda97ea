package inboxtest

import "context"

// Hooks for the external tests in package inboxtest_test.

// TemplateName is the template database Database clones ("" before the
// first Database call).
func TemplateName() string {
	if envVal == nil {
		return ""
	}
	return envVal.tmplName
}

// ExternalDatabase sets up INBOX_TEST_DATABASE_URL mode against adminDSN
// without touching the package's shared state, and creates an empty database
// there. drop removes the database and closes the setup's connections.
func ExternalDatabase(ctx context.Context, adminDSN string) (dsn string, drop func() error, err error) {
	e, err := newExternalEnv(ctx, adminDSN)
	if err != nil {
		return "", nil, err
	}
	name := databaseName("external")
	if err := e.createDatabase(ctx, name, ""); err != nil {
		e.closeIdle()
		return "", nil, err
	}
	drop = func() error {
		defer e.closeIdle()
		return e.dropDatabase(context.Background(), name)
	}
	return e.dsnFor(name), drop, nil
}

// SetCitusBinDir makes the Citus cluster use the server binaries in dir.
// Call it before the first Citus database.
func SetCitusBinDir(dir string) { citusOpts.Node.BinDir = dir }
