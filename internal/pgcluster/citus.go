package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrCitusNotInstalled is returned (wrapped) by [StartCitus] when the
// PostgreSQL server has no Citus extension library (citus.so).
var ErrCitusNotInstalled = errors.New("pgcluster: Citus is not installed in this PostgreSQL server")

// CitusOptions configures [StartCitus]. The zero value is what tests want.
type CitusOptions struct {
	// Node configures every node's server as Options configures [Start].
	// TCP is always on (the nodes talk to each other over 127.0.0.1), and
	// Node.Settings are applied over the Citus settings listed at
	// [StartCitus].
	Node Options

	// Workers is the number of worker nodes. Defaults to 2.
	Workers int
}

// Citus is a running throwaway Citus cluster: a coordinator and its workers,
// each a [Cluster] of its own. Create it with [StartCitus], databases in it
// with [Citus.CreateDatabase], and release it with [Citus.Stop].
type Citus struct {
	// Coordinator is the node applications connect to.
	Coordinator *Cluster
	// Workers hold the shards.
	Workers []*Cluster

	log *slog.Logger

	stopOnce sync.Once
	stopErr  error
}

// citusTemplate is the database every node clones for CreateDatabase: the
// citus extension created, and on the coordinator the nodes registered.
const citusTemplate = "pgcluster_citus"

// StartCitus starts a coordinator and opts.Workers workers from the
// installed server binaries, each as [Start] does plus these settings
// (opts.Node.Settings override them):
//
//	listen_addresses = 127.0.0.1, port = a free TCP port
//	shared_preload_libraries = citus
//	citus.node_conninfo = 'sslmode=disable'    (loopback only: no certificates, no TLS between nodes)
//	citus.enable_statistics_collection = off  (no usage reports sent home)
//	max_prepared_transactions = 300           (two-phase commits across nodes)
//	max_worker_processes = 128                (Citus runs a maintenance daemon per database in use, per node)
//	wal_level = logical                       (citus_move_shard_placement copies shards by logical replication)
//
// It then prepares a template database on every node, which
// [Citus.CreateDatabase] clones. It returns an error wrapping
// [ErrCitusNotInstalled] when the server has no citus.so. On failure,
// every node it started is stopped and removed.
func StartCitus(ctx context.Context, opts CitusOptions) (_ *Citus, err error) {
	t0 := time.Now()
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	node := opts.Node
	if node.BinDir == "" {
		if node.BinDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	if err := checkCitusInstalled(node.BinDir); err != nil {
		return nil, err
	}
	node.TCP = true
	node.Settings = maps.Clone(citusSettings)
	maps.Copy(node.Settings, opts.Node.Settings)
	logger := node.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	c := &Citus{Workers: make([]*Cluster, opts.Workers), log: logger}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	ctx, cancel := withStartTimeout(ctx, node)
	defer cancel()
	nodes := make([]*Cluster, 1+opts.Workers)
	for i := range nodes {
		if nodes[i], err = create(node); err != nil {
			return nil, err
		}
		if i == 0 {
			c.Coordinator = nodes[0]
		} else {
			c.Workers[i-1] = nodes[i]
		}
	}
	// One initdb; the workers copy its fresh data directory, which takes a
	// tenth of initdb's CPU time.
	if err := c.Coordinator.initdb(ctx); err != nil {
		return nil, err
	}
	if err := eachNode(len(c.Workers), func(i int) error { return copyDataDir(ctx, c.Coordinator, c.Workers[i]) }); err != nil {
		return nil, err
	}
	err = eachNode(len(nodes), func(i int) error {
		err := nodes[i].startNew(ctx)
		if err != nil && strings.Contains(err.Error(), `could not access file "citus"`) {
			return fmt.Errorf("%w: %w", ErrCitusNotInstalled, err)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	tNodes := time.Since(t0)
	if err := c.buildTemplate(ctx); err != nil {
		return nil, err
	}
	if citusStartHook != nil {
		if err := citusStartHook(c); err != nil {
			return nil, err
		}
	}
	c.log.Info("pgcluster: citus cluster started", "coordinator", c.Coordinator.Port(), "workers", opts.Workers,
		"nodes", tNodes.Round(time.Millisecond), "total", time.Since(t0).Round(time.Millisecond))
	return c, nil
}

var citusSettings = map[string]string{
	"shared_preload_libraries":           "citus",
	"citus.node_conninfo":                "sslmode=disable",
	"citus.enable_statistics_collection": "off",
	"max_prepared_transactions":          strconv.Itoa(MaxConnections),
	"max_worker_processes":               "128",
	"wal_level":                          "logical",
}

// copyDataDir copies from's data directory, fresh from initdb and never
// started, to to's, as the servers' OS user.
func copyDataDir(ctx context.Context, from, to *Cluster) error {
	cmd := exec.CommandContext(ctx, "cp", "-R", "-p", from.dataDir, to.dataDir)
	cmd.Dir = to.dir
	cmd.SysProcAttr = toolSysProcAttr(to.cred)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: copying a data directory: %w\n%s", err, out)
	}
	return nil
}

// citusStartHook, when set (by tests), runs at the end of StartCitus; an
// error from it fails the start.
var citusStartHook func(*Citus) error

// checkCitusInstalled looks for citus.so in the server's library directory
// when pg_config sits beside the server binaries. Without pg_config the
// server's own start-up error tells.
func checkCitusInstalled(binDir string) error {
	out, err := exec.Command(filepath.Join(binDir, "pg_config"), "--pkglibdir").Output()
	if err != nil {
		return nil
	}
	lib := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(lib, "citus.so")); err == nil {
		return nil
	}
	return fmt.Errorf("%w: no citus.so in %s. Install Citus for this server from your package manager "+
		"(for example postgresql-15-citus-13.2 from the Citus repository on packagecloud.io), or build Citus 13.2 "+
		"from source (github.com/citusdata/citus: ./configure PG_CONFIG=%s && make && make install)",
		ErrCitusNotInstalled, lib, filepath.Join(binDir, "pg_config"))
}

// buildTemplate creates the template database on every node: the citus
// extension everywhere, the coordinator and the workers registered on the
// coordinator (which syncs the metadata to the workers). It then closes the
// template to connections, so it can be cloned.
func (c *Citus) buildTemplate(ctx context.Context) error {
	nodes := c.Nodes()
	if err := eachNode(len(nodes), func(i int) error {
		if err := execOn(ctx, nodes[i], "postgres", "CREATE DATABASE "+citusTemplate); err != nil {
			return err
		}
		return execOn(ctx, nodes[i], citusTemplate, "CREATE EXTENSION citus")
	}); err != nil {
		return fmt.Errorf("pgcluster: creating the citus extension: %w", err)
	}
	register := fmt.Sprintf("SELECT citus_set_coordinator_host('127.0.0.1', %d)", c.Coordinator.Port())
	for _, w := range c.Workers {
		register += fmt.Sprintf("; SELECT citus_add_node('127.0.0.1', %d)", w.Port())
	}
	if err := execOn(ctx, c.Coordinator, citusTemplate, register); err != nil {
		return fmt.Errorf("pgcluster: registering the citus nodes: %w", err)
	}
	// The maintenance daemon and Citus's cached connections stay in the
	// template; a clone needs it empty, and nothing may reconnect.
	return c.CloseTemplate(ctx, citusTemplate)
}

// CreateDatabase creates database name on every node, with the citus
// extension and the nodes registered: a clone of a template made at start,
// which takes a fraction of a second. Citus connects to the workers'
// databases of the same name, so the name must not be in use on any node.
// On failure, the copies already made are dropped again.
func (c *Citus) CreateDatabase(ctx context.Context, name string) error {
	return c.CreateDatabaseFrom(ctx, name, citusTemplate)
}

// CreateDatabaseFrom is [Citus.CreateDatabase] cloning database template
// on every node instead of the empty one: a database made with
// CreateDatabase, prepared (a schema, distributed tables) and closed with
// [Citus.CloseTemplate]. Its shards and Citus metadata are copied with it,
// so the clone is a distributed database of its own.
func (c *Citus) CreateDatabaseFrom(ctx context.Context, name, template string) error {
	nodes := c.Nodes()
	created := make([]bool, len(nodes))
	err := eachNode(len(nodes), func(i int) error {
		// A session CloseTemplate ended may still be exiting (CREATE DATABASE
		// waits 5 s for it): on a busy machine, try again a while. A session
		// that reached the template anyway is ended again before each retry,
		// and named if it outlives them all.
		var err error
		for attempt := 1; attempt <= dropAttempts; attempt++ {
			err = execOn(ctx, nodes[i], "postgres", "CREATE DATABASE "+quoteIdent(name)+" TEMPLATE "+quoteIdent(template)+" STRATEGY FILE_COPY")
			var pgErr *pgconn.PgError
			if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
				break
			}
			if held := endSessions(ctx, nodes[i], template); held != "" {
				err = fmt.Errorf("%w (in it: %s)", err, held)
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		}
		created[i] = err == nil
		return err
	})
	if err != nil {
		for i, ok := range created {
			if ok {
				dropOn(context.WithoutCancel(ctx), nodes[i], name)
			}
		}
		return fmt.Errorf("pgcluster: creating citus database %s: %w", name, err)
	}
	return nil
}

// CloseTemplate makes database name clonable by [Citus.CreateDatabaseFrom]:
// on every node it refuses new connections to it and ends the sessions in
// it (Citus's maintenance daemon and cached connections between nodes).
func (c *Citus) CloseTemplate(ctx context.Context, name string) error {
	nodes := c.Nodes()
	return eachNode(len(nodes), func(i int) error {
		return execOn(ctx, nodes[i], "postgres",
			"ALTER DATABASE "+quoteIdent(name)+" WITH ALLOW_CONNECTIONS false; "+
				"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "+quoteLiteral(name))
	})
}

// DropDatabase drops database name on every node, coordinator first,
// terminating the sessions still in it and rolling back the two-phase
// commits a fault left prepared in it (which would block the drop). It
// retries for up to a minute while ended sessions are still exiting.
func (c *Citus) DropDatabase(ctx context.Context, name string) error {
	if err := dropOn(ctx, c.Coordinator, name); err != nil {
		return err
	}
	return eachNode(len(c.Workers), func(i int) error { return dropOn(ctx, c.Workers[i], name) })
}

func dropOn(ctx context.Context, n *Cluster, name string) error {
	conn, err := pgconn.Connect(ctx, n.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: dropping database %s on %s: %w", name, n.Dir(), err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = $1", [][]byte{[]byte(name)}, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("pgcluster: dropping database %s on %s: %w", name, n.Dir(), res.Err)
	}
	if len(res.Rows) > 0 {
		// ROLLBACK PREPARED only works from the transaction's own database.
		sql := ""
		for _, row := range res.Rows {
			sql += "ROLLBACK PREPARED " + quoteLiteral(string(row[0])) + ";"
		}
		if err := execOn(ctx, n, name, sql); err != nil {
			return fmt.Errorf("pgcluster: dropping database %s on %s: rolling back its prepared transactions: %w", name, n.Dir(), err)
		}
	}
	// No new session may start while the old ones end (a pool reconnecting,
	// Citus's maintenance daemon), or FORCE has to end it again.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+quoteIdent(name)+" ALLOW_CONNECTIONS false").ReadAll(); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // 3D000: already gone
			return fmt.Errorf("pgcluster: dropping database %s on %s: %w", name, n.Dir(), err)
		}
	}
	// WITH (FORCE) ends the sessions in the database, then waits 5 s for
	// them to exit. A busy machine (or a backend stuck in a system call)
	// can take longer; the database is throwaway, so keep trying a while.
	for attempt := 1; ; attempt++ {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)").ReadAll()
		var pgErr *pgconn.PgError
		if err == nil || attempt == dropAttempts || !errors.As(err, &pgErr) || pgErr.Code != "55006" ||
			!strings.Contains(pgErr.Message, "being accessed by other users") {
			if err != nil {
				return fmt.Errorf("pgcluster: dropping database %s on %s: %w", name, n.Dir(), err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: dropping database %s on %s: %w (last error: %v)", name, n.Dir(), ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dropAttempts bounds DropDatabase's retries: each waits up to 5 s for the
// sessions it ended.
const dropAttempts = 12

// ConnString returns a connection string for database dbname on the
// coordinator, as [Cluster.ConnString].
func (c *Citus) ConnString(dbname string) string { return c.Coordinator.ConnString(dbname) }

// Nodes returns the coordinator followed by the workers.
func (c *Citus) Nodes() []*Cluster {
	return append([]*Cluster{c.Coordinator}, c.Workers...)
}

// Stop stops every node and removes its directory, as [Cluster.Stop] does.
// It is idempotent and safe for concurrent use.
func (c *Citus) Stop() error {
	c.stopOnce.Do(func() {
		nodes := c.Nodes()
		c.stopErr = eachNode(len(nodes), func(i int) error {
			if nodes[i] == nil {
				return nil
			}
			return nodes[i].Stop()
		})
	})
	return c.stopErr
}

// eachNode runs f(0) ... f(n-1) concurrently and joins their errors.
func eachNode(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// execOn runs sql (one or more statements, no parameters) in database
// dbname on node n.
func execOn(ctx context.Context, n *Cluster, dbname, sql string) error {
	conn, err := pgconn.Connect(ctx, n.ConnString(dbname))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql).ReadAll()
	return err
}

// endSessions ends the sessions in database name on n and says which they
// were (application name or backend type, and PID), for an error message.
func endSessions(ctx context.Context, n *Cluster, name string) string {
	conn, err := pgconn.Connect(ctx, n.ConnString("postgres"))
	if err != nil {
		return ""
	}
	defer conn.Close(context.Background())
	// MATERIALIZED: the filter on the database runs before any termination.
	res := conn.ExecParams(ctx, `WITH s AS MATERIALIZED (
			SELECT pid, coalesce(nullif(application_name, ''), backend_type) AS who
			FROM pg_stat_activity WHERE datname = $1)
		SELECT coalesce(string_agg(who || ' ' || pid, ', '), '') FROM s WHERE pg_terminate_backend(pid)`,
		[][]byte{[]byte(name)}, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) == 0 {
		return ""
	}
	return string(res.Rows[0][0])
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
