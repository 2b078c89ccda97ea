// Package drills holds pginbox's failure drills: tests that run accepts and a
// worker against real PostgreSQL clusters while the server is restarted,
// fails over to a standby, runs out of disk (a tablespace, the WAL volume),
// loses backends, runs out of connection slots or has its xmin horizon held,
// and while a Citus cluster loses a worker node (SIGKILL), restarts its
// coordinator or moves a shard, and then count what was acknowledged, what
// the database holds, and what was lost or applied twice. Each drill also
// checks that its fault happened and that its load sent every planned
// message.
//
// The full drills take minutes and run with `make drills` (PGINBOX_DRILLS=1);
// `go test` alone runs short smoke versions of two of them and skips the rest.
package drills
