package rabbitmq_test

import (
	"testing"

	"github.com/pginbox/pginbox/internal/pgtest"
	"github.com/pginbox/pginbox/schema"
)

// The only place this package's tests touch the test kit.

func TestMain(m *testing.M) {
	pgtest.SetMigrate(schema.UpDSN)
	pgtest.Main(m)
}

// testDSN is a fresh migrated database for t.
func testDSN(t testing.TB) string { return pgtest.DB(t) }
