package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inboxtype"
)

// Nodes is the worker nodes of a Citus database that pginbox's sessions run
// on: the nodes holding shards of pginbox's tables, the node of each scope,
// and, for every pool pginbox was given, a pool per node with the same
// settings and the node's address. Citus 11 and later run distributed
// statements on any node, locally when the shard is there, so a scope's
// statements sent to its node run without a hop; sent to another node (a
// shard moved since the placements were read) they are still routed right,
// with a hop.
type Nodes struct {
	coord   *pgxpool.Pool
	cfg     NodesConfig
	stop    context.CancelFunc
	stopped chan struct{}

	mu        sync.RWMutex
	groups    []int32                           // node groups, in the order they were first met: a node's index
	addrs     []string                          // host:port per index
	placement map[int64]int                     // shard of pginbox_receipts -> node index
	pools     map[*pgxpool.Pool][]*pgxpool.Pool // per pool given, a pool per node index (nil until used)
	closed    bool

	shards  sync.Map // scope ID -> shard ID
	cached  atomic.Int64
	lookups atomic.Uint64 // scope lookups sent (tests)
}

// NodesConfig configures ConnectNodes.
type NodesConfig struct {
	// Addrs maps a node's address in Citus's metadata (pg_dist_node's
	// "host:port") to the address this process reaches it at. Defaults to
	// the metadata's address for every node.
	Addrs map[string]string
	// MaxConnsPerNode bounds each node pool. Defaults to the MaxConns of
	// the pool it copies.
	MaxConnsPerNode int32
	// Refresh is how often the shard placements are read again, so that
	// moved shards and added nodes are followed. Defaults to 30 seconds.
	Refresh time.Duration
}

// maxCachedScopes bounds the scopes whose shard is remembered; past it the
// cache starts over.
const maxCachedScopes = 1 << 20

// ErrNotDistributed: ConnectNodes was given a database whose pginbox tables
// are not distributed by Citus.
var ErrNotDistributed = errors.New("pginbox's tables are not distributed by Citus in this database: sessions on worker nodes need `inbox migrate up --citus`")

// ConnectNodes reads the nodes holding pginbox's shards from the Citus
// metadata of coord's database and follows their placements every
// cfg.Refresh. It opens no connection to a node until a pool is asked for.
func ConnectNodes(ctx context.Context, coord *pgxpool.Pool, cfg NodesConfig) (*Nodes, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 30 * time.Second
	}
	d, err := For(ctx, coord)
	if err != nil {
		return nil, err
	}
	if d.Name() != "citus" {
		return nil, ErrNotDistributed
	}
	n := &Nodes{coord: coord, cfg: cfg, placement: map[int64]int{}, pools: map[*pgxpool.Pool][]*pgxpool.Pool{}, stopped: make(chan struct{})}
	if err := n.Refresh(ctx); err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	go n.follow(rctx)
	return n, nil
}

// placementsQuery lists where each shard of pginbox_receipts is (all of
// pginbox's tables are colocated with it), with its node's address.
const placementsQuery = `SELECT p.shardid, p.groupid, n.nodename, n.nodeport
FROM pg_dist_shard s
JOIN pg_dist_placement p ON p.shardid = s.shardid
JOIN pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
WHERE s.logicalrelid = 'pginbox_receipts'::regclass
ORDER BY p.groupid, p.shardid`

// Refresh reads the shard placements again.
func (n *Nodes) Refresh(ctx context.Context) error {
	rows, err := n.coord.Query(ctx, placementsQuery)
	if err != nil {
		return fmt.Errorf("reading the shard placements: %w", err)
	}
	type placed struct {
		Shard int64
		Group int32
		Host  string
		Port  int32
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[placed])
	if err != nil {
		return fmt.Errorf("reading the shard placements: %w", err)
	}
	if len(all) == 0 {
		return errors.New("reading the shard placements: pginbox_receipts has no shards")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	placement := make(map[int64]int, len(all))
	for _, p := range all {
		i := slices.Index(n.groups, p.Group)
		addr := net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port)))
		if to, ok := n.cfg.Addrs[addr]; ok {
			addr = to
		}
		if i < 0 {
			i = len(n.groups)
			n.groups = append(n.groups, p.Group)
			n.addrs = append(n.addrs, addr)
		}
		placement[p.Shard] = i
	}
	n.placement = placement
	return nil
}

func (n *Nodes) follow(ctx context.Context) {
	defer close(n.stopped)
	t := time.NewTicker(n.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A failed read keeps the placements known: at worst a statement
		// takes a hop.
		rctx, cancel := context.WithTimeout(ctx, n.cfg.Refresh)
		_ = n.Refresh(rctx)
		cancel()
	}
}

// Count is the number of nodes known.
func (n *Nodes) Count() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.groups)
}

// Addr is node i's address.
func (n *Nodes) Addr(i int) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.addrs[i]
}

// errNodesClosed: a pool was asked of closed Nodes.
var errNodesClosed = errors.New("pginbox: the Citus nodes were closed")

// Pool returns the pool of node i that copies base: base's settings with
// the node's address, at most MaxConnsPerNode connections, and every
// statement planned for its parameters (plan_cache_mode force_custom_plan:
// on a node that holds shards, Citus 13.2 keeps a plan per execution of a
// reused plan on a local shard for as long as the session lasts, about 60
// KB each; a custom plan keeps nothing and costs no more there).
func (n *Nodes) Pool(base *pgxpool.Pool, i int) (*pgxpool.Pool, error) {
	n.mu.RLock()
	if ps := n.pools[base]; i < len(ps) && ps[i] != nil {
		n.mu.RUnlock()
		return ps[i], nil
	}
	n.mu.RUnlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errNodesClosed
	}
	ps := n.pools[base]
	for len(ps) <= i {
		ps = append(ps, nil)
	}
	if ps[i] == nil {
		cfg := base.Config().Copy()
		host, port, err := net.SplitHostPort(n.addrs[i])
		if err != nil {
			return nil, fmt.Errorf("the address of Citus node %s: %w", n.addrs[i], err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("the address of Citus node %s: %w", n.addrs[i], err)
		}
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
		// The fallbacks carry sslmode prefer and allow (TLS, then without):
		// the same, on the node.
		var fallbacks []*pgconn.FallbackConfig
		for _, f := range cfg.ConnConfig.Fallbacks {
			if slices.ContainsFunc(fallbacks, func(g *pgconn.FallbackConfig) bool { return g.TLSConfig == f.TLSConfig }) {
				continue // another host of the pool's: this pool has one
			}
			g := *f
			g.Host, g.Port = host, uint16(p)
			fallbacks = append(fallbacks, &g)
		}
		cfg.ConnConfig.Fallbacks = fallbacks
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
		if n.cfg.MaxConnsPerNode > 0 {
			cfg.MaxConns = n.cfg.MaxConnsPerNode
			cfg.MinConns = min(cfg.MinConns, cfg.MaxConns)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, fmt.Errorf("a pool on Citus node %s: %w", n.addrs[i], err)
		}
		ps[i] = pool
	}
	n.pools[base] = ps
	return ps[i], nil
}

// Of returns the index of the node holding scope s's shards, reading the
// scope's shard the first time (on a node, not the coordinator).
func (n *Nodes) Of(ctx context.Context, s inboxtype.Scope) (int, error) {
	shard, err := n.shardOf(ctx, s.ID)
	if err != nil {
		return 0, err
	}
	n.mu.RLock()
	i, ok := n.placement[shard]
	n.mu.RUnlock()
	if !ok {
		// A shard created since the placements were read (a split).
		if err := n.Refresh(ctx); err != nil {
			return 0, err
		}
		n.mu.RLock()
		i, ok = n.placement[shard]
		n.mu.RUnlock()
		if !ok {
			return 0, fmt.Errorf("shard %d of scope %q has no placement", shard, s.ID)
		}
	}
	return i, nil
}

const shardQuery = `SELECT get_shard_id_for_distribution_column('pginbox_receipts', $1::text)`

func (n *Nodes) shardOf(ctx context.Context, scopeID string) (int64, error) {
	if v, ok := n.shards.Load(scopeID); ok {
		return v.(int64), nil
	}
	n.lookups.Add(1)
	var shard int64
	var errs []error
	found := false
	for i := range n.Count() {
		pool, err := n.Pool(n.coord, i)
		if err == nil {
			if err = pool.QueryRow(ctx, shardQuery, scopeID).Scan(&shard); err == nil {
				found = true
				break
			}
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if !found {
		return 0, fmt.Errorf("finding the shard of scope %q: %w", scopeID, errors.Join(errs...))
	}
	if n.cached.Add(1) > maxCachedScopes {
		n.shards.Clear()
		n.cached.Store(1)
	}
	n.shards.Store(scopeID, shard)
	return shard, nil
}

// Lookups counts the scope lookups sent so far.
func (n *Nodes) Lookups() uint64 { return n.lookups.Load() }

// Close stops following the placements and closes every node pool. Close
// it after the Clients, Workers and Admins that use it.
func (n *Nodes) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	pools := n.pools
	n.pools = nil
	n.mu.Unlock()
	n.stop()
	<-n.stopped
	for _, ps := range pools {
		for _, p := range ps {
			if p != nil {
				p.Close()
			}
		}
	}
}
