//go:build !unix

package pgcluster

import (
	"os"
	"syscall"
	"time"
)

// This package only runs servers on unix systems; elsewhere Start fails.
// These stubs keep the package (and its importers) compiling.

type credential struct{}

func toolSysProcAttr(*credential) *syscall.SysProcAttr   { return nil }
func serverSysProcAttr(*credential) *syscall.SysProcAttr { return nil }
func credentialFor(string) (*credential, error)          { return nil, nil }
func chownFor(string, *credential) error                 { return nil }
func processAlive(int) bool                              { return true }

var (
	sigFast      os.Signal = os.Interrupt
	sigImmediate os.Signal = os.Kill
)

const (
	supported             = false
	haveParentDeathSignal = false
)

func childrenOf(int) []int               { return nil }
func waitGone([]int, time.Duration) bool { return true }
func killPids([]int)                     {}
