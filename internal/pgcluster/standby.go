package pgcluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StartStandby creates a streaming replica of c and starts it: a base backup
// of c (pg_basebackup, WAL streamed along) into a new cluster directory,
// configured to follow c as a hot standby under application_name name, the
// name c's synchronous_standby_names refers to. opts configure the standby's
// server as they do for [Start]; BinDir and OSUser default to c's. It returns
// once the standby accepts (read-only) connections. Stop it like any
// cluster; [Cluster.Promote] makes it a primary.
func (c *Cluster) StartStandby(ctx context.Context, name string, opts Options) (_ *Cluster, err error) {
	t0 := time.Now()
	ctx, cancel := withStartTimeout(ctx, opts)
	defer cancel()
	if opts.BinDir == "" {
		opts.BinDir = c.binDir
	}
	if opts.OSUser == "" {
		opts.OSUser = c.opts.OSUser
	}
	s, err := create(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	primary := fmt.Sprintf("host=%s port=%d user=%s application_name=%s",
		quoteConnValue(c.dir), c.port, Superuser, quoteConnValue(name))
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, "pg_basebackup"),
		"--pgdata="+s.dataDir,
		"--dbname="+primary,
		"--wal-method=stream",
		"--write-recovery-conf", // standby.signal and primary_conninfo (with application_name)
		"--checkpoint=fast",
		"--no-sync",
	)
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = toolSysProcAttr(s.cred)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pgcluster: pg_basebackup of %s failed: %w\n%s", c.dir, err, tail(out.Bytes(), 40))
	}
	if err := s.startServer(ctx); err != nil {
		return nil, err
	}
	s.log.Info("pgcluster: standby started", "dir", s.dir, "primary", c.dir, "name", name, "took", time.Since(t0).Round(time.Millisecond))
	return s, nil
}

// Promote ends recovery on a standby and waits (up to a minute) until it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgconn.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: promote: %w", err)
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(ctx, "SELECT pg_promote(true, 60)").ReadAll()
	if err != nil {
		return fmt.Errorf("pgcluster: promote: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "t" {
		return fmt.Errorf("pgcluster: promote: the server did not finish its promotion within a minute; server log:\n%s", c.LogTail())
	}
	return nil
}
