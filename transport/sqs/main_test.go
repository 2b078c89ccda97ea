package sqs_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/transport/internal/drill"
)

// The test kit's calls live here only, so switching kits touches one file.

func TestMain(m *testing.M) {
	if serveKumo() {
		return
	}
	inboxtest.Main(m)
}

// testDSN is a fresh migrated database private to the test.
func testDSN(t testing.TB) string { return inboxtest.Database(t) }

// newPool is a pool on a fresh migrated database, closed at test end.
func newPool(t testing.TB) *pgxpool.Pool { return drill.Pool(t, testDSN(t), nil) }
