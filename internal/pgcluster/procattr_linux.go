//go:build linux

package pgcluster

import "syscall"

// serverSysProcAttr returns the process attributes for the postmaster:
// its own process group, so signals aimed at the caller's process group
// (a terminal's ^C, a test killing its own children by group) don't reach
// it, and a parent-death signal, so the server doesn't outlive its owner.
//
// SIGQUIT is PostgreSQL's "immediate shutdown": the postmaster stops its
// backends and exits without a checkpoint, which is fine for a throwaway
// cluster.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process. The caller must fork from a goroutine locked to its OS thread
// for the server's lifetime (see Cluster.run). Go applies Pdeathsig after
// switching credentials, so the switch doesn't clear it.
func serverSysProcAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: cred,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGQUIT,
	}
}

const haveParentDeathSignal = true
