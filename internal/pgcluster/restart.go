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
	// ShutdownKill sends SIGKILL to the postmaster alone, as the kernel's
	// out-of-memory killer or an operator's kill -9 does. Its backends are
	// left running: each exits when it next waits (PostgreSQL ends sessions
	// whose postmaster died), and the next start runs crash recovery.
	// Shutdown returns once none of the server's processes is left, which
	// a new postmaster needs (it refuses shared memory still in use); after
	// a minute it kills the stragglers.
	ShutdownKill
)

func (m ShutdownMode) String() string {
	switch m {
	case ShutdownImmediate:
		return "immediate"
	case ShutdownKill:
		return "kill"
	}
	return "fast"
}

func (m ShutdownMode) signal() os.Signal {
	switch m {
	case ShutdownImmediate:
		return sigImmediate
	case ShutdownKill:
		return os.Kill
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
	var children []int
	if mode == ShutdownKill {
		children = childrenOf(srv.proc.Pid)
	}
	if !srv.signalAndWait(mode.signal(), time.Minute) {
		return fmt.Errorf("pgcluster: postgres (pid %d) did not exit within a minute of a %s shutdown", srv.proc.Pid, mode)
	}
	if mode == ShutdownKill {
		if !waitGone(children, time.Minute) {
			killPids(children)
			if !waitGone(children, 10*time.Second) {
				return fmt.Errorf("pgcluster: the backends of postgres (pid %d) still run 70s after it was killed", srv.proc.Pid)
			}
		}
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
	return c.Start(ctx)
}

// Start starts a server stopped with [Cluster.Shutdown] again, on the same
// data directory, socket, port and settings, and returns once it accepts
// connections (after crash recovery, if it was not shut down cleanly).
// Options.StartTimeout bounds that wait. On a running server it does
// nothing.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if !down {
		return nil
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
