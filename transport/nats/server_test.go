package nats_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// privateServer is a nats-server of the test's own, on a free loopback port
// with file storage in a temporary directory, so a drill can really kill and
// restart it. The shared broker is never restarted.
type privateServer struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
	exited   chan struct{}
}

// startPrivateServer starts a private server. Without the nats-server
// binary (INBOX_TEST_NATS_SERVER, else PATH, else /usr/sbin/nats-server) it
// skips the test, or fails it when CI=true.
func startPrivateServer(t testing.TB) *privateServer {
	t.Helper()
	bin := os.Getenv("INBOX_TEST_NATS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			bin = "/usr/sbin/nats-server"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the nats-server binary is missing (%v); CI must install it (apt-get install nats-server) or set INBOX_TEST_NATS_SERVER", err)
		}
		t.Skipf("skipping: nats-server binary not found (%v); install it (apt-get install nats-server) or set INBOX_TEST_NATS_SERVER", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &privateServer{bin: bin, dir: t.TempDir(), port: port}
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	return s
}

func (s *privateServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start runs the server and waits until it accepts connections.
func (s *privateServer) start(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command(s.bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting nats-server: %v", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.cmd, s.exited)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not listen on %d: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *privateServer) kill(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("nats-server %d did not exit after SIGKILL", s.cmd.Process.Pid)
	}
	s.cmd = nil
}
