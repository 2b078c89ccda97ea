package conformance

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Process is a broker process of the test's own, on a free loopback port
// with its data in a temporary directory, so a case can kill and restart it.
// The shared brokers on the default ports are never restarted.
type Process struct {
	name   string
	bin    string
	args   []string
	env    []string
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartProcess runs a broker binary: bin is the path from the environment
// variable env, else the PATH lookup of name, else fallback. args gets the
// port and data directory. Without the binary it skips the test with one
// line, or fails it when CI=true. The process is killed at test end.
func StartProcess(t testing.TB, name, env, fallback string, args func(port int, dir string) []string) *Process {
	t.Helper()
	return StartProcessEnv(t, name, env, fallback, args, nil)
}

// StartProcessEnv is StartProcess with environment variables (from
// environ, which may be nil) added to the test's.
func StartProcessEnv(t testing.TB, name, env, fallback string, args, environ func(port int, dir string) []string) *Process {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath(name); err != nil {
			bin = fallback
		}
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("conformance: the %s binary is missing (%v); CI must install it or set %s", name, err, env)
		}
		t.Skipf("conformance: skipping: the %s binary is missing (%v); install it or set %s", name, err, env)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := &Process{name: name, bin: bin, port: port, dir: t.TempDir()}
	if args != nil {
		p.args = args(port, p.dir)
	}
	if environ != nil {
		p.env = environ(port, p.dir)
	}
	p.start(t)
	t.Cleanup(func() { p.stop(t, syscall.SIGKILL) })
	return p
}

// Addr is the host:port the process listens on.
func (p *Process) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.port) }

// Restart kills the process with SIGKILL and starts it again on the same
// port and data directory.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.stop(t, syscall.SIGKILL)
	p.start(t)
}

// CleanRestart is Restart with a SIGTERM: the process saves what it keeps
// in memory and exits, then starts again. It is for a broker that writes
// its data only on a schedule and at a clean stop (Mosquitto), which no
// setting makes survive a SIGKILL.
func (p *Process) CleanRestart(t testing.TB) {
	t.Helper()
	p.stop(t, syscall.SIGTERM)
	p.start(t)
}

// Cleanly is p as a Broker whose Restart is a CleanRestart.
func Cleanly(p *Process) Broker { return cleanRestarts{p} }

type cleanRestarts struct{ *Process }

func (b cleanRestarts) Restart(t testing.TB) { b.CleanRestart(t) }

func (p *Process) start(t testing.TB) {
	t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Dir = p.dir
	if p.env != nil {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", p.name, err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(p.cmd, p.exited)
	deadline := time.Now().Add(2 * time.Minute) // a RabbitMQ node on a loaded machine takes its time
	for {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it listened on %d", p.name, p.port)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %d: %v", p.name, p.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Process) stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("%s (pid %d) did not exit after %v", p.name, p.cmd.Process.Pid, sig)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}
