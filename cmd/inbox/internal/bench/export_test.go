package bench

import "time"

// SetCitusStatsSettle sets how long the citus scenario's cost account waits
// for the statistics to settle, until the test ends.
func SetCitusStatsSettle(t interface{ Cleanup(func()) }, d time.Duration) {
	old := citusStatsSettle
	citusStatsSettle = d
	t.Cleanup(func() { citusStatsSettle = old })
}
