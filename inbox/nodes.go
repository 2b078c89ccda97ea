package inbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/driver"
)

// Nodes runs pginbox's sessions on the worker nodes of a Citus cluster
// instead of its coordinator. Citus 11 and later run distributed statements
// on any node, locally when the shard is there: a Client sends each scope's
// accepts to the node holding the scope's shards, and a Worker claims on
// every node from that node's own shards, runs each handler transaction on
// its receipt's node and listens for wake-ups on every node. The
// coordinator is then left with migrations and the operator's views across
// tenants.
//
// Create one with ConnectNodes, give it to Config.Nodes and
// WorkerConfig.Nodes, and Close it after them. Without it every session
// goes through the pool's server, on one server as on Citus.
type Nodes struct {
	n *driver.Nodes
}

// NodesConfig configures ConnectNodes. The zero value reads everything from
// Citus's metadata.
type NodesConfig struct {
	// Addrs maps a node's address in Citus's metadata (pg_dist_node's
	// "host:port") to the address this process reaches it at. Defaults to
	// the metadata's address for every node.
	Addrs map[string]string
	// MaxConnsPerNode bounds each node's pool. Defaults to the MaxConns of
	// the pool it copies (a Client's, a Worker's or its SystemPool's).
	MaxConnsPerNode int32
	// Refresh is how often the shard placements are read again, so moved
	// shards and added nodes are followed. Defaults to 30 seconds.
	Refresh time.Duration
}

// ErrNotDistributed: ConnectNodes was given a database whose pginbox tables
// Citus does not distribute.
var ErrNotDistributed = driver.ErrNotDistributed

// ConnectNodes reads, from the Citus metadata of pool's database (on the
// coordinator), the worker nodes that hold pginbox's shards. Every pool
// given to a Client or Worker that uses the returned Nodes gets a copy per
// node: the same settings (user, password, database) with the node's
// address, opened at first use. A scope's statements go to its node; one
// sent to another node (a shard moved since the placements were last read)
// still runs there, with a hop.
func ConnectNodes(ctx context.Context, pool *pgxpool.Pool, cfg NodesConfig) (*Nodes, error) {
	if pool == nil {
		return nil, errors.New("pginbox: ConnectNodes: pool is nil: pass a pool on the Citus coordinator")
	}
	n, err := driver.ConnectNodes(ctx, pool, driver.NodesConfig{
		Addrs: cfg.Addrs, MaxConnsPerNode: cfg.MaxConnsPerNode, Refresh: cfg.Refresh,
	})
	if err != nil {
		return nil, dbError("connecting to the Citus nodes", err)
	}
	return &Nodes{n: n}, nil
}

// Count is the number of nodes holding pginbox's shards.
func (n *Nodes) Count() int { return n.n.Count() }

// Pools returns base's copy on every node, in node order, opening those not
// opened yet: same settings, the node's address. n owns them: Close closes
// them.
func (n *Nodes) Pools(base *pgxpool.Pool) ([]*pgxpool.Pool, error) {
	out := make([]*pgxpool.Pool, n.n.Count())
	for i := range out {
		p, err := n.n.Pool(base, i)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// Close closes the node pools. Close the Clients and stop the Workers that
// use n first.
func (n *Nodes) Close() { n.n.Close() }

// shardNodeLog is where a component warns that its pool's server holds
// shards: nowhere with Nodes, whose pools are meant to (and plan each
// statement for its parameters, which keeps their sessions flat).
func shardNodeLog(log *slog.Logger, nodes *Nodes) *slog.Logger {
	if nodes != nil {
		return nil
	}
	return log
}

// on returns where r's statements run: its node's copy of base when the
// worker claimed it on a node (WorkerConfig.Nodes), base otherwise.
func (w *Worker) on(base *pgxpool.Pool, r claimed) *pgxpool.Pool {
	if r.node < 0 {
		return base
	}
	p, err := w.nodes.n.Pool(base, r.node)
	if err != nil {
		return base // closed: the pool's server routes the statement too
	}
	return p
}

// poolFor returns the pool on scope s's node that copies base, or base
// without Nodes.
func (n *Nodes) poolFor(ctx context.Context, base *pgxpool.Pool, s Scope) (*pgxpool.Pool, error) {
	if n == nil {
		return base, nil
	}
	i, err := n.n.Of(ctx, s)
	if err != nil {
		return nil, dbError("finding the node of "+s.String(), err)
	}
	return n.n.Pool(base, i)
}

// notify sends ReceiptNotify on node, the node of the accepts it wakes the
// workers for (a worker claims on the node a wake-up came from), or on the
// first node that takes it when that node is unknown (-1) or down.
func (n *Nodes) notify(ctx context.Context, base *pgxpool.Pool, node int, consumers []string) error {
	var errs []error
	try := func(i int) bool {
		p, err := n.n.Pool(base, i)
		if err == nil {
			if err = db.New(p).ReceiptNotify(ctx, consumers); err == nil {
				return true
			}
		}
		errs = append(errs, err)
		return false
	}
	if node >= 0 && try(node) {
		return nil
	}
	for i := range n.n.Count() {
		if i != node && try(i) {
			return nil
		}
	}
	return errors.Join(errs...)
}

// nodeIdle remembers which Citus worker nodes had nothing due at their
// last claim, so the claim loop asks them again only after a wake-up from
// them (or one it cannot place) or a poll interval: every claim round
// would otherwise run a discovery read on every idle node. A wake-up that
// arrives while a claim runs counts: the claim may have read before the
// work it announces committed. Its zero value is ready.
type nodeIdle struct {
	mu    sync.Mutex
	wakes map[int]uint64 // wake-ups from each node so far
	all   uint64         // wake-ups from no node in particular so far
	idle  map[int]idleMark
}

// idleMark is when a node's claim found nothing, and the wake-ups counted
// when that claim began.
type idleMark struct {
	since      time.Time
	wakes, all uint64
}

// wakeCount is what a claim of node i records before it begins.
type wakeCount struct{ wakes, all uint64 }

// before returns node i's wake-ups so far, for claimed.
func (n *nodeIdle) before(i int) wakeCount {
	n.mu.Lock()
	defer n.mu.Unlock()
	return wakeCount{n.wakes[i], n.all}
}

// skip reports whether the claim loop passes over node i now.
func (n *nodeIdle) skip(i int, poll time.Duration) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, idle := n.idle[i]
	return idle && m.wakes == n.wakes[i] && m.all == n.all && time.Since(m.since) < poll
}

// claimed records node i's claim, begun at c: it found nothing due (idle),
// or it did.
func (n *nodeIdle) claimed(i int, idle bool, c wakeCount) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.idle == nil {
		n.idle = map[int]idleMark{}
	}
	if idle {
		n.idle[i] = idleMark{since: time.Now(), wakes: c.wakes, all: c.all}
	} else {
		delete(n.idle, i)
	}
}

// wake records a wake-up from node i.
func (n *nodeIdle) wake(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wakes == nil {
		n.wakes = map[int]uint64{}
	}
	n.wakes[i]++
}

// wakeAll records a wake-up whose node is unknown (sent through the
// coordinator, or a recovery, a promotion): every node may have work.
func (n *nodeIdle) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.all++
}
