package bench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

// citusSingle starts the single-node side: a cluster with the bench's
// settings, pginbox's schema and the business table.
func (s *suite) citusSingle(ctx context.Context) (*citusSide, error) {
	s.prog.note("citus: starting a single node beside the Citus cluster (fsync %s)", onOff(!s.o.NoFsync))
	c, err := pgcluster.Start(ctx, pgcluster.Options{Fsync: !s.o.NoFsync, Settings: citusStatsSettings("pg_stat_statements")})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := createDatabase(ctx, c.ConnString("postgres"), "pginbox_bench"); err != nil {
		c.Stop()
		return nil, err
	}
	dsn := c.ConnString("pginbox_bench")
	if err := schema.UpDSN(ctx, dsn); err != nil {
		c.Stop()
		return nil, fmt.Errorf("bench: %w", err)
	}
	side, err := s.citusOpen(ctx, "single", "s", dsn, false, `CREATE TABLE bench_citus_effects (scope_id text NOT NULL, message_id text NOT NULL);
		CREATE TABLE bench_citus_raw (scope_id text NOT NULL, message_id text NOT NULL, PRIMARY KEY (scope_id, message_id))`)
	if err != nil {
		c.Stop()
		return nil, err
	}
	nodes, err := openCostNodes(ctx, []string{"node"}, []*pgcluster.Cluster{c})
	if err != nil {
		side.close()
		c.Stop()
		return nil, err
	}
	side.meter = &costMeter{db: "pginbox_bench", nodes: nodes, trips: side.trips}
	side.stop = func() { side.close(); closeCostNodes(nodes); c.Stop() }
	return side, nil
}

// citusCluster starts the Citus cluster, a coordinator and two workers with
// the bench's settings, pginbox's Citus schema and the business tables
// colocated with pginbox's, and returns its two sides: every session
// through the coordinator, and the sessions on the worker nodes
// (inbox.Nodes). Stop the nodes side first.
func (s *suite) citusCluster(ctx context.Context) (cit, onNodes *citusSide, err error) {
	s.prog.note("citus: starting a Citus cluster (coordinator + 2 workers on 127.0.0.1, fsync %s)", onOff(!s.o.NoFsync))
	c, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{Node: pgcluster.Options{Fsync: !s.o.NoFsync,
		Settings: citusStatsSettings("citus,pg_stat_statements")}})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	if err := c.CreateDatabase(ctx, "pginbox_bench"); err != nil {
		c.Stop()
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	dsn := c.ConnString("pginbox_bench")
	if _, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{}); err != nil {
		c.Stop()
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	cit, err = s.citusOpen(ctx, "citus", "c", dsn, false, `CREATE TABLE bench_citus_effects (scope_id text NOT NULL, message_id text NOT NULL);
		SELECT create_distributed_table('bench_citus_effects', 'scope_id', colocate_with => 'pginbox_receipts');
		CREATE TABLE bench_citus_raw (scope_id text NOT NULL, message_id text NOT NULL, PRIMARY KEY (scope_id, message_id));
		SELECT create_distributed_table('bench_citus_raw', 'scope_id', colocate_with => 'pginbox_receipts')`)
	if err != nil {
		c.Stop()
		return nil, nil, err
	}
	names := []string{"coordinator"}
	for i := range c.Workers {
		names = append(names, fmt.Sprintf("worker%d", i+1))
	}
	nodes, err := openCostNodes(ctx, names, c.Nodes())
	if err != nil {
		cit.close()
		c.Stop()
		return nil, nil, err
	}
	cit.meter = &costMeter{db: "pginbox_bench", nodes: nodes, trips: cit.trips}
	cit.stop = func() { cit.close(); closeCostNodes(nodes); c.Stop() }

	onNodes, err = s.citusOpen(ctx, "nodes", "n", dsn, true, "")
	if err == nil {
		err = s.citusRawNodes(ctx, onNodes)
	}
	if err != nil {
		if onNodes != nil {
			onNodes.close()
		}
		cit.stop()
		return nil, nil, err
	}
	onNodes.meter = &costMeter{db: "pginbox_bench", nodes: nodes, trips: onNodes.trips}
	onNodes.stop = onNodes.close
	return cit, onNodes, nil
}

// citusOpen opens a side's pool, with a round-trip counter, and its client
// (on the worker nodes with onNodes), and runs ddl.
func (s *suite) citusOpen(ctx context.Context, name, tag, dsn string, onNodes bool, ddl string) (*citusSide, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := newNamedPool(ctx, cfg, s.o.Concurrency+2, "bench-citus-"+name)
	if err != nil {
		return nil, err
	}
	side := &citusSide{name: name, tag: tag, pool: pool, onNodes: onNodes, trips: trips}
	if ddl != "" {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			pool.Close()
			return nil, fmt.Errorf("bench: %s: %w", name, err)
		}
	}
	var nodes *inbox.Nodes
	if onNodes {
		if nodes, err = inbox.ConnectNodes(ctx, pool, inbox.NodesConfig{}); err != nil {
			pool.Close()
			return nil, fmt.Errorf("bench: %s: %w", name, err)
		}
	}
	side.client, err = inbox.NewClient(pool, inbox.Config{Logger: discardLogger, Nodes: nodes})
	if err != nil {
		if nodes != nil {
			nodes.Close()
		}
		pool.Close()
		return nil, err
	}
	side.closeNodes = func() {
		if nodes != nil {
			nodes.Close()
		}
	}
	return side, nil
}

// close closes the side's client, its node pools and its pools.
func (side *citusSide) close() {
	side.client.Close()
	side.closeNodes()
	for _, p := range side.rawPools {
		p.Close()
	}
	side.pool.Close()
}

// citusRawNodes opens the nodes side's raw pools, one on each worker node
// (from pg_dist_node, as inbox.Nodes finds them, with its plan_cache_mode),
// and finds each tenant's node, so that its raw loops send every row to
// the node holding it, as its Client does.
func (s *suite) citusRawNodes(ctx context.Context, side *citusSide) error {
	rows, err := side.pool.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE noderole = 'primary' AND groupid <> 0 ORDER BY groupid`)
	if err != nil {
		return fmt.Errorf("bench: nodes: %w", err)
	}
	type node struct {
		Name string
		Port int32
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[node])
	if err != nil {
		return fmt.Errorf("bench: nodes: %w", err)
	}
	index := map[string]int{}
	for _, n := range all {
		cfg := side.pool.Config()
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = n.Name, uint16(n.Port), nil
		cfg.ConnConfig.Tracer = nil // the raw loops are not pginbox's round trips
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
		pool, err := newNamedPool(ctx, cfg, s.o.Concurrency+2, "bench-citus-nodes-raw")
		if err != nil {
			return err
		}
		index[net.JoinHostPort(n.Name, strconv.Itoa(int(n.Port)))] = len(side.rawPools)
		side.rawPools = append(side.rawPools, pool)
	}
	side.rawNode = map[string]int{}
	for t := range s.o.CitusTenants {
		tenant := citusTenant(t, s.o.CitusTenants)
		var host string
		var port int32
		err := side.pool.QueryRow(ctx, `SELECT nodename, nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('bench_citus_raw', $1::text)`, tenant).Scan(&host, &port)
		if err != nil {
			return fmt.Errorf("bench: the node of %s: %w", tenant, err)
		}
		i, ok := index[net.JoinHostPort(host, strconv.Itoa(int(port)))]
		if !ok {
			return fmt.Errorf("bench: the node of %s, %s:%d, is not a worker node", tenant, host, port)
		}
		side.rawNode[tenant] = i
	}
	return nil
}

// rawPool is where the side's raw loops send tenant's rows.
func (side *citusSide) rawPool(tenant string) *pgxpool.Pool {
	if side.rawPools == nil {
		return side.pool
	}
	return side.rawPools[side.rawNode[tenant]]
}

// citusRaw is the raw loop beside a phase: calls transactions from workers
// callers, each writing perTx rows of one tenant into bench_citus_raw, one
// statement per row as a handler would, then committing. With perTx 1 it
// is one plain INSERT per commit, the cheapest durable write Citus routes;
// with oneStatement, the perTx rows go in one multi-row INSERT (as an
// AcceptBatch of one tenant goes in one call).
func (s *suite) citusRaw(ctx context.Context, side *citusSide, label string, calls, workers, perTx int, oneStatement bool) sample {
	base := side.rawSent
	side.rawSent += calls * perTx
	const insert = "INSERT INTO bench_citus_raw (scope_id, message_id) VALUES "
	var multi strings.Builder
	multi.WriteString(insert)
	for j := range perTx {
		if j > 0 {
			multi.WriteString(", ")
		}
		fmt.Fprintf(&multi, "($1, $%d)", j+2)
	}
	id := func(n int) string { return fmt.Sprint(side.tag, "r-", n) }
	return load(ctx, s.prog, label, calls, workers, perTx, func(ctx context.Context, i int) error {
		tenant := citusTenant(i, s.o.CitusTenants)
		pool := side.rawPool(tenant)
		if perTx == 1 || oneStatement {
			args := []any{tenant}
			for j := range perTx {
				args = append(args, id(base+i*perTx+j))
			}
			_, err := pool.Exec(ctx, multi.String(), args...)
			return err
		}
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for j := range perTx {
				if _, err := tx.Exec(ctx, insert+"($1, $2)", tenant, id(base+i*perTx+j)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}
