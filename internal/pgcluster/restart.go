package pgcluster

import (
	"context"
	"fmt"
	"os"
	"time"
)

// ShutdownMode is how [Cluster.Shutdown] and [Cluster.Restart] stop the
// server, as in `pg_ctl stop -m`.
type ShutdownMode int

const (
	// ShutdownFast aborts every session, writes a checkpoint and exits.
	ShutdownFast ShutdownMode = iota
	// ShutdownImmediate makes every process exit at once, without a
	// checkpoint: the next start runs crash recovery, as after a power
	// loss of the server (not of the disk: written WAL stays).
	ShutdownImmediate
)

func (m ShutdownMode) String() string {
	if m == ShutdownImmediate {
		return "immediate"
	}
	return "fast"
}

func (m ShutdownMode) signal() os.Signal {
	if m == ShutdownImmediate {
		return sigImmediate
	}
	return sigFast
}

// Shutdown stops the server in mode and keeps its data directory, for
// [Cluster.Restart] or a standby's failover. [Cluster.Stop] still removes
// everything later.
func (c *Cluster) Shutdown(mode ShutdownMode) error {
	c.mu.Lock()
	srv, down := c.srv, c.down
	c.down = true
	c.mu.Unlock()
	if srv == nil || down {
		return nil
	}
	select {
	case <-srv.exited:
		return fmt.Errorf("pgcluster: postgres had exited before Shutdown (%v); server log:\n%s", srv.waitErr, c.LogTail())
	default:
	}
	if !srv.signalAndWait(mode.signal(), time.Minute) {
		return fmt.Errorf("pgcluster: postgres (pid %d) did not exit within a minute of a %s shutdown", srv.proc.Pid, mode)
	}
	c.log.Info("pgcluster: server shut down", "dir", c.dir, "mode", mode.String())
	return nil
}

// Restart shuts the server down in mode and starts it again on the same
// data directory, socket and settings, like `pg_ctl restart -m mode`. It
// returns once the server accepts connections again (after crash recovery,
// for ShutdownImmediate); Options.StartTimeout bounds that wait.
func (c *Cluster) Restart(ctx context.Context, mode ShutdownMode) error {
	if err := c.Shutdown(mode); err != nil {
		return err
	}
	ctx, cancel := withStartTimeout(ctx, c.opts)
	defer cancel()
	t0 := time.Now()
	if err := c.startServer(ctx); err != nil {
		return err
	}
	c.log.Info("pgcluster: server restarted", "dir", c.dir, "mode", mode.String(), "pid", c.Pid(), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// Running reports whether the postmaster runs: false after Shutdown, Stop,
// or when the server exited on its own.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	srv := c.srv
	c.mu.Unlock()
	if srv == nil {
		return false
	}
	select {
	case <-srv.exited:
		return false
	default:
		return true
	}
}

// StartAgain starts the server on the same data directory, socket and
// settings after it exited on its own, for example after a PANIC it could
// not recover from (a full WAL volume), or after Shutdown. It returns once
// the server accepts connections (after crash recovery); Options.StartTimeout
// bounds that wait. It refuses while the server runs: use Restart then.
func (c *Cluster) StartAgain(ctx context.Context) error {
	if c.Running() {
		return fmt.Errorf("pgcluster: the server (pid %d) is running; Restart restarts a running server", c.Pid())
	}
	ctx, cancel := withStartTimeout(ctx, c.opts)
	defer cancel()
	t0 := time.Now()
	if err := c.startServer(ctx); err != nil {
		return err
	}
	c.log.Info("pgcluster: server started again", "dir", c.dir, "pid", c.Pid(), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}
