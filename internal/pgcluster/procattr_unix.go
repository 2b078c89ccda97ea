//go:build unix && !linux

package pgcluster

import "syscall"

// serverSysProcAttr: see the Linux version. Other systems have no
// parent-death signal, so a server whose owner is killed keeps running until
// it's stopped by hand.
func serverSysProcAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: cred,
		Setpgid:    true,
	}
}

const haveParentDeathSignal = false
