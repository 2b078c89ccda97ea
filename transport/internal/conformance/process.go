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
	ready  func(addr string) error
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
	return StartProcessReady(t, name, env, fallback, args, environ, nil)
}

// StartProcessReady is StartProcessEnv with the check that the process is
// ready: ready(addr) returns nil once it answers (a broker that listens
// before it serves, such as a RabbitMQ node, says so in its own protocol).
// Nil ready waits for a TCP connection to be accepted.
func StartProcessReady(t testing.TB, name, env, fallback string, args, environ func(port int, dir string) []string, ready func(addr string) error) *Process {
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
	p := &Process{name: name, bin: bin, port: port, dir: t.TempDir(), ready: ready}
	if p.ready == nil {
		p.ready = accepts
	}
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
	p.waitReady(t)
}

// waitReady polls until the process answers, for as long as the test may
// run: a broker on a loaded machine takes its time (a RabbitMQ node, minutes),
// and a fixed bound fails a test that would pass. It fails the test when the
// process exits first, or shortly before the test's deadline (-timeout), so
// that the failure names the process rather than a panic naming every test.
func (p *Process) waitReady(t testing.TB) {
	t.Helper()
	start := time.Now()
	deadline, bounded := testDeadline(t)
	for {
		err := p.ready(p.Addr())
		if err == nil {
			if took := time.Since(start); took > 10*time.Second {
				t.Logf("%s answered on %d after %v", p.name, p.port, took.Round(time.Second))
			}
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it answered on %d: %v", p.name, p.port, err)
		default:
		}
		if bounded && time.Now().After(deadline) {
			t.Fatalf("%s did not answer on %d in %v, and the test's deadline is near: %v", p.name, p.port, time.Since(start).Round(time.Second), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deadlineMargin is the time left, at a failed wait, for the test to report
// and clean up (stop its processes) before the test binary's deadline.
const deadlineMargin = 30 * time.Second

// testDeadline is when a wait of t's must give up: deadlineMargin before
// the test binary's deadline. bounded is false when it has none
// (-timeout 0).
func testDeadline(t testing.TB) (deadline time.Time, bounded bool) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	if deadline, bounded = d.Deadline(); bounded {
		deadline = deadline.Add(-deadlineMargin)
	}
	return deadline, bounded
}

// accepts is the default readiness: a TCP connection to addr is accepted.
func accepts(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
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
