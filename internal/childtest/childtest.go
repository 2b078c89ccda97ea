//go:build unix

// Package childtest runs crash-test children: re-executions of the test
// binary that run one test function, configured through the environment, and
// report progress with marker lines on stdout. The parent reads the markers
// and kills children with SIGKILL at the points it chooses.
//
//	func TestChild(t *testing.T) {
//		if os.Getenv("MY_CHILD") == "" {
//			t.Skip("only runs as a child process")
//		}
//		childtest.ExitWithParent()
//		childtest.Mark("ready")
//		...
//	}
//
//	c := childtest.Start(t, "TestChild", "MY_CHILD=1")
//	c.WaitFor(t, "ready")
//	c.Kill(t)
package childtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const marker = "childtest: "

// Mark prints a marker line for the parent. Call it from the child only.
func Mark(format string, args ...any) {
	fmt.Printf(marker+format+"\n", args...)
}

// ExitWithParent makes the child exit when its parent dies: the parent holds
// the child's stdin open, so EOF means it is gone.
func ExitWithParent() {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
}

// Child is a running child process.
type Child struct {
	name    string
	cmd     *exec.Cmd
	out     *output
	exited  chan struct{}
	waitErr error
}

// Start runs the test function named test in a child process of the test
// binary, with env added to the parent's environment. The child is killed
// when t ends, and its output logged if t failed.
func Start(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), env...)
	out := &output{markers: make(chan string, 4096)}
	cmd.Stdout, cmd.Stderr = out, out
	if _, err := cmd.StdinPipe(); err != nil { // closed by Wait; EOF tells an orphan to exit
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{name: strings.Join(env, " "), cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			t.Logf("child %s output:\n%s", c.name, out.text())
		}
	})
	return c
}

// Marker returns the child's next marker line, failing the test when the
// child exits or reports nothing for a minute.
func (c *Child) Marker(t testing.TB) string {
	t.Helper()
	select {
	case m := <-c.out.markers:
		return m
	case <-c.exited:
		select { // it may have printed before exiting
		case m := <-c.out.markers:
			return m
		default:
		}
		t.Fatalf("child %s exited (%v) before reporting:\n%s", c.name, c.waitErr, c.out.text())
	case <-time.After(time.Minute):
		t.Fatalf("child %s reported nothing for a minute:\n%s", c.name, c.out.text())
	}
	return ""
}

// Exited is closed when the child process has ended.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Signal sends sig to the child.
func (c *Child) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Err is how the child ended (nil for exit status 0); read it once Exited
// is closed.
func (c *Child) Err() error { return c.waitErr }

// Output is what the child printed besides its marker lines.
func (c *Child) Output() string { return c.out.text() }

// PendingMarkers returns the marker lines printed but not yet read, without
// waiting for more.
func (c *Child) PendingMarkers() []string {
	var ms []string
	for {
		select {
		case m := <-c.out.markers:
			ms = append(ms, m)
		default:
			return ms
		}
	}
}

// Kill sends SIGKILL and waits for the child to die of it.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	select {
	case <-c.exited:
		t.Fatalf("child %s exited (%v) before it was killed:\n%s", c.name, c.waitErr, c.out.text())
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child %s ended with %v, not by SIGKILL:\n%s", c.name, c.waitErr, c.out.text())
	}
}

// output splits a child's output into marker lines and everything else.
type output struct {
	mu      sync.Mutex
	partial []byte
	other   bytes.Buffer
	markers chan string
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(o.partial[:i])
		o.partial = o.partial[i+1:]
		if m, ok := strings.CutPrefix(line, marker); ok {
			select {
			case o.markers <- m:
			default: // never block the child
			}
		} else if o.other.Len() < 1<<20 {
			o.other.WriteString(line + "\n")
		}
	}
}

func (o *output) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.other.String() + string(o.partial)
}
