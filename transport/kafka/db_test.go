package kafka_test

import (
	"testing"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// The only place this package's tests touch the test kit.

func TestMain(m *testing.M) {
	if serveKfake() { // a broker process of the restart cases
		return
	}
	inboxtest.Main(m)
}

// testDSN is a fresh migrated database for t.
func testDSN(t testing.TB) string { return inboxtest.Database(t) }
