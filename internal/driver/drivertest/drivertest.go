// Package drivertest is the conformance suite of package driver: every
// driver runs it, on a real database of its layout, and must pass it
// whole. Each case drives one transition of docs/ARCHITECTURE.md through
// the Driver interface (and through package db for the statements that are
// the same on every layout, on the same database) and checks what the
// database holds after it, so two layouts cannot drift apart unnoticed.
//
// A driver's runner is one test:
//
//	func TestConformanceCitus(t *testing.T) {
//		drivertest.Run(t, drivertest.Harness{Driver: "citus", Database: inboxtest.CitusDatabase})
//	}
//
// A new case is a function of *env added to its group's list (the lists are
// at the top of each group's file); every case gets a database of its own,
// so it may change anything in it.
package drivertest

import (
	"testing"
)

// Harness is what a driver's runner gives the suite.
type Harness struct {
	// Driver is the name driver.For must find on each database ("postgres",
	// "citus"): the suite checks it, so a runner cannot test another layout
	// than it says.
	Driver string
	// Database returns the connection string of a new database private to
	// t, with pginbox's schema and no rows, for a superuser (the suite
	// creates its own restricted roles). inboxtest.Database and
	// inboxtest.CitusDatabase are two.
	Database func(t testing.TB) string
	// OnNodes claims as a worker with sessions on the Citus worker nodes
	// does: on each node, from that node's shards (driver.ClaimerConfig's
	// Local), every node in turn.
	OnNodes bool
}

// testCase is one case of a group.
type testCase struct {
	name string
	run  func(e *env)
}

// group is a concern of docs/ARCHITECTURE.md and its cases.
type group struct {
	name  string
	cases []testCase
}

// groups are every case of the suite, per concern.
func groups() []group {
	return []group{
		{"Accept", acceptCases},
		{"Claim", claimCases},
		{"Settle", settleCases},
		{"Admin", adminCases},
		{"Scope", scopeCases},
		{"Outbox", outboxCases},
	}
}

// Run runs every case of the suite against h's driver, in parallel, each on
// a database of its own.
func Run(t *testing.T, h Harness) {
	if h.Driver == "" || h.Database == nil {
		t.Fatal("drivertest: Harness needs Driver and Database")
	}
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(newEnv(t, h))
				})
			}
		})
	}
}
