// Package historycheck records histories of concurrent admin operations on
// real PostgreSQL while sessions are killed, and checks them for
// linearizability with porcupine. It is a module of its own so that
// porcupine stays out of pginbox's module graph.
package historycheck
