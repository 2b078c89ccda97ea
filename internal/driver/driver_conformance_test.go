package driver_test

import (
	"testing"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/driver/drivertest"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// The conformance suite on one server.
func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, drivertest.Harness{Driver: "postgres", Database: inboxtest.Database})
}

// The conformance suite on Citus, pginbox's tables distributed by scope.
func TestConformanceCitus(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, drivertest.Harness{Driver: "citus", Database: inboxtest.CitusDatabase})
}

// The conformance suite on Citus with the claims of a worker whose
// sessions run on the worker nodes: each node claims from its own shards.
func TestConformanceCitusOnNodes(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, drivertest.Harness{Driver: "citus", Database: inboxtest.CitusDatabase, OnNodes: true})
}
