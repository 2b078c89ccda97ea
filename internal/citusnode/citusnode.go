// Package citusnode tells whether a session runs on a Citus node that holds
// shards of a table: pginbox's sessions belong on a coordinator without
// shards, and a Client, Worker, Admin or Relay on such a node says so.
package citusnode

import (
	"context"
	"log/slog"

	"github.com/pginbox/pginbox/db"
)

// localShards reports whether the session's node holds a placement of a
// shard of the table named $1 (a worker node, or a coordinator with shards).
const localShards = `SELECT EXISTS (SELECT 1 FROM pg_dist_placement p JOIN pg_dist_shard s USING (shardid)
	WHERE s.logicalrelid = to_regclass($1) AND p.groupid = (SELECT groupid FROM pg_dist_local_group))`

// warning is what Warn logs.
const warning = "pginbox: connected to a Citus node that holds shards of pginbox's tables; " +
	"connect pginbox to a coordinator without shards: on this node a session grows with every run of a reused " +
	"statement plan on a local shard (Citus 13.2 keeps a plan per run, about 30 to 100 KB, until the session ends), " +
	"and wake-ups reach only the workers listening on this node (docs/SCALE-OUT.md)"

// HoldsShards reports whether q's node holds shards of the distributed
// table. Call it only on Citus (it reads Citus's catalog).
func HoldsShards(ctx context.Context, q db.DBTX, table string) (bool, error) {
	var held bool
	err := q.QueryRow(ctx, localShards, table).Scan(&held)
	return held, err
}

// Warn logs that the session's node holds shards.
func Warn(ctx context.Context, log *slog.Logger) { log.WarnContext(ctx, warning) }
