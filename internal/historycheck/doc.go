// Package historycheck records histories of concurrent worker and admin
// operations (claims, failures, handler transactions, recoveries, requeues,
// replays, purges and redeliveries) on real PostgreSQL while sessions are
// killed, and checks them for linearizability with porcupine. It is a module
// of its own so that porcupine stays out of pginbox's module graph.
package historycheck
