// Package historycheck records histories of concurrent worker and admin
// operations (claims, failures, handler transactions, recoveries, requeues,
// replays, purges and redeliveries) on real PostgreSQL while sessions are
// killed, connections cut and (on a server of the test's own) the server
// crashes, and checks them for linearizability with porcupine. It is a
// module of its own so that porcupine stays out of pginbox's module graph.
package historycheck
