//go:build unix

package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// credential is the OS identity the server processes run as.
type credential = syscall.Credential

// toolSysProcAttr returns the process attributes for initdb.
func toolSysProcAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// credentialFor returns the credential to run the server with, and the
// uid/gid that must own its directory. With a non-root euid it returns nil:
// the server runs as the current user.
func credentialFor(osUser string) (*credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(osUser)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and PostgreSQL refuses to run as root, but OS user %q was not found (%v): "+
			"create it (e.g. `useradd --system --user-group %s`, or install the postgresql package, which creates it), or run as a non-root user", osUser, err, osUser)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: user %q has non-numeric uid %q", osUser, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: user %q has non-numeric gid %q", osUser, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("pgcluster: OS user %q is root; PostgreSQL needs an unprivileged user", osUser)
	}
	// An empty Groups slice (NoSetGroups false) drops root's supplementary
	// groups.
	return &credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// processAlive reports whether pid exists. It errs on the side of "alive":
// only a definite ESRCH counts as dead.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}

// Shutdown signals understood by the postmaster.
var (
	sigFast      os.Signal = syscall.SIGINT  // fast shutdown: abort sessions, checkpoint, exit
	sigImmediate os.Signal = syscall.SIGQUIT // immediate shutdown: no checkpoint
)

// chownFor makes path owned by cred's user (a no-op when cred is nil).
func chownFor(path string, cred *credential) error {
	if cred == nil {
		return nil
	}
	return os.Chown(path, int(cred.Uid), int(cred.Gid))
}

const supported = true
