package pgcluster

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// The fault drills' view of a Citus cluster: which node holds a value's
// shard, and moving a shard to another node. A node is stopped, killed and
// started again as any [Cluster] ([Cluster.Shutdown], [Cluster.Start],
// [Cluster.Restart]); Citus finds it again at the same port.

// NodeAt returns the node listening at port, or nil.
func (c *Citus) NodeAt(port int) *Cluster {
	for _, n := range c.Nodes() {
		if n.Port() == port {
			return n
		}
	}
	return nil
}

// ShardOf returns the shard of distributed table holding value (of its
// distribution column) in database dbname, and the node that holds it.
func (c *Citus) ShardOf(ctx context.Context, dbname, table, value string) (int64, *Cluster, error) {
	rows, err := queryOn(ctx, c.Coordinator, dbname, `
		SELECT s.shardid::text, p.nodeport::text
		FROM (SELECT get_shard_id_for_distribution_column($1::regclass, $2::text) AS shardid) s
		JOIN pg_dist_shard_placement p USING (shardid)`, table, value)
	if err != nil {
		return 0, nil, fmt.Errorf("pgcluster: finding the shard of %s = %q: %w", table, value, err)
	}
	if len(rows) != 1 {
		return 0, nil, fmt.Errorf("pgcluster: the shard of %s = %q has %d placements; want 1", table, value, len(rows))
	}
	id, _ := strconv.ParseInt(rows[0][0], 10, 64)
	port, _ := strconv.Atoi(rows[0][1])
	n := c.NodeAt(port)
	if n == nil {
		return 0, nil, fmt.Errorf("pgcluster: the shard of %s = %q is on port %d, which is no node of this cluster", table, value, port)
	}
	return id, n, nil
}

// MoveShard moves shard shardID of database dbname (with the shards
// colocated with it) to node to, online: citus_move_shard_placement with
// shard_transfer_mode 'force_logical', which copies the shards and then
// follows their changes by logical replication (wal_level = logical on
// every node, and a primary key or replica identity on every table of the
// colocation group), blocking writes to them only for the switch-over. It
// returns the node the shard left.
func (c *Citus) MoveShard(ctx context.Context, dbname string, shardID int64, to *Cluster) (*Cluster, error) {
	rows, err := queryOn(ctx, c.Coordinator, dbname,
		"SELECT nodeport::text FROM pg_dist_shard_placement WHERE shardid = $1", strconv.FormatInt(shardID, 10))
	if err != nil || len(rows) != 1 {
		return nil, fmt.Errorf("pgcluster: finding shard %d: %d placements, %v", shardID, len(rows), err)
	}
	port, _ := strconv.Atoi(rows[0][0])
	from := c.NodeAt(port)
	if from == nil || from == to {
		return nil, fmt.Errorf("pgcluster: shard %d is on port %d; cannot move it to port %d", shardID, port, to.Port())
	}
	_, err = queryOn(ctx, c.Coordinator, dbname, `
		SELECT citus_move_shard_placement($1::bigint, '127.0.0.1', $2::int, '127.0.0.1', $3::int, shard_transfer_mode => 'force_logical')::text`,
		strconv.FormatInt(shardID, 10), strconv.Itoa(from.Port()), strconv.Itoa(to.Port()))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: moving shard %d from port %d to port %d: %w", shardID, from.Port(), to.Port(), err)
	}
	return from, nil
}

// queryOn runs sql with text parameters in database dbname on node n and
// returns its rows as text.
func queryOn(ctx context.Context, n *Cluster, dbname, sql string, args ...string) ([][]string, error) {
	conn, err := pgconn.Connect(ctx, n.ConnString(dbname))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([][]string, len(res.Rows))
	for i, r := range res.Rows {
		for _, v := range r {
			out[i] = append(out[i], string(v))
		}
	}
	return out, nil
}
