package faultproxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/testkit"
)

// echoServer answers every line with "echo: <line>" and records what it read,
// so tests can tell what reached the upstream.
type echoServer struct {
	ln   net.Listener
	mu   sync.Mutex
	got  []string
	wg   sync.WaitGroup
	eofs int // connections whose client side ended cleanly
}

func startEcho(t *testing.T, network, address string) *echoServer {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						if errors.Is(err, io.EOF) {
							s.mu.Lock()
							s.eofs++
							s.mu.Unlock()
						}
						return
					}
					s.mu.Lock()
					s.got = append(s.got, strings.TrimSuffix(line, "\n"))
					s.mu.Unlock()
					if _, err := io.WriteString(c, "echo: "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *echoServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func newProxy(t *testing.T, network, address string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends line and reads the echo, failing the test after 5s.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	send(t, c, line)
	expectLine(t, c, r, "echo: "+line, 5*time.Second)
}

func send(t *testing.T, c net.Conn, line string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("writing %q: %v", line, err)
	}
}

func expectLine(t *testing.T, c net.Conn, r *bufio.Reader, want string, within time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading %q: %v", want, err)
	}
	if got = strings.TrimSuffix(got, "\n"); got != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectSilence checks that nothing arrives on c for d.
func expectSilence(t *testing.T, c net.Conn, r *bufio.Reader, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	line, err := r.ReadString('\n')
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read %q, %v while blackholed; want a timeout", line, err)
	}
}

// expectClosed checks that the proxy closed c.
func expectClosed(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.ReadString('\n')
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection still open: read error %v", err)
	}
}

// finReceived reports whether the kernel delivered the FIN of the TCP
// connection from client to the proxy's side of it (which is in
// CLOSE_WAIT): the proxy could see the close, whether it reads or not.
func finReceived(t *testing.T, client net.Conn) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	hexAddr := func(a net.Addr) string {
		ta := a.(*net.TCPAddr)
		ip := ta.IP.To4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
	}
	// The proxy's side: local is the client's remote, remote the client's local.
	local, remote := hexAddr(client.RemoteAddr()), hexAddr(client.LocalAddr())
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && f[2] == remote {
			return f[3] == "08" // TCP_CLOSE_WAIT
		}
	}
	return false
}

func tcpEcho(t *testing.T) (*echoServer, *faultproxy.Proxy) {
	s := startEcho(t, "tcp", "127.0.0.1:0")
	return s, newProxy(t, "tcp", s.ln.Addr().String())
}

func TestPassesTrafficToUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "fp") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	startEcho(t, "unix", sock)
	p := newProxy(t, "unix", sock)
	c, r := dial(t, p)
	roundTrip(t, c, r, "hello")
	roundTrip(t, c, r, strings.Repeat("x", 100_000)) // more than one read buffer
	if p.Port() == 0 || !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("proxy address %s", p.Addr())
	}
}

func TestCutClosesBothSidesAndLaterConnectionsPass(t *testing.T) {
	s, p := tcpEcho(t)
	c1, r1 := dial(t, p)
	c2, r2 := dial(t, p)
	roundTrip(t, c1, r1, "a")
	roundTrip(t, c2, r2, "b")

	if n := p.Cut(); n != 2 {
		t.Fatalf("Cut closed %d connections, want 2", n)
	}
	expectClosed(t, c1, r1)
	expectClosed(t, c2, r2)
	testkit.Eventually(t, 5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.eofs == 2
	}, "the upstream side to close")
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Open() == 0 }, "no open links")

	c3, r3 := dial(t, p)
	roundTrip(t, c3, r3, "after the cut")
	if p.CutCount() != 2 || p.Accepted() != 3 {
		t.Fatalf("CutCount %d, Accepted %d; want 2, 3", p.CutCount(), p.Accepted())
	}
}

func TestBlackholeHoldsTrafficUntilResume(t *testing.T) {
	s, p := tcpEcho(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "before")

	p.Blackhole()
	p.Blackhole()        // idempotent
	send(t, c, "during") // the write succeeds: it is buffered
	expectSilence(t, c, r, 200*time.Millisecond)
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Held() == 1 }, "the write to be held")
	if got := s.received(); len(got) != 1 {
		t.Fatalf("upstream received %q while blackholed", got)
	}
	// A new connection is accepted but gets nothing through either.
	c2, r2 := dial(t, p)
	send(t, c2, "new")
	expectSilence(t, c2, r2, 100*time.Millisecond)

	p.Resume()
	expectLine(t, c, r, "echo: during", 5*time.Second) // delivered, in order
	expectLine(t, c2, r2, "echo: new", 5*time.Second)
	roundTrip(t, c, r, "after")
	if p.Held() != 0 {
		t.Fatalf("Held = %d after resume", p.Held())
	}
}

func TestCutDuringBlackholeLosesHeldData(t *testing.T) {
	s, p := tcpEcho(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "before")
	p.Blackhole()
	send(t, c, "lost")
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Held() == 1 }, "the write to be held")
	p.Cut()
	expectClosed(t, c, r)
	p.Resume()
	c2, r2 := dial(t, p)
	roundTrip(t, c2, r2, "fresh")
	for _, line := range s.received() {
		if line == "lost" {
			t.Fatal("data held by the blackhole reached the upstream after a cut")
		}
	}
}

func TestClientCloseDuringBlackholeStillDeliversHeldData(t *testing.T) {
	s, p := tcpEcho(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "before")
	p.Blackhole()
	send(t, c, "last words")
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Held() == 1 }, "the write to be held")
	c.Close() // the client gives up; its data is already on the wire
	testkit.Eventually(t, 5*time.Second, func() bool { return finReceived(t, c) }, "the close to reach the proxy")
	p.Resume()
	testkit.Eventually(t, 5*time.Second, func() bool {
		got := s.received()
		return len(got) == 2 && got[1] == "last words"
	}, "the held data to arrive")
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Open() == 0 }, "the link to close")
}

func TestRefuseClosesNewConnectionsOnly(t *testing.T) {
	_, p := tcpEcho(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "open")
	p.Refuse()
	c2, r2 := dial(t, p) // the kernel completes the handshake; the proxy closes it
	expectClosed(t, c2, r2)
	roundTrip(t, c, r, "still open")
	p.Resume()
	c3, r3 := dial(t, p)
	roundTrip(t, c3, r3, "accepted again")
}

func TestHalfCloseDeliversTheReply(t *testing.T) {
	_, p := tcpEcho(t)
	c, r := dial(t, p)
	send(t, c, "bye")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	expectLine(t, c, r, "echo: bye", 5*time.Second)
	expectClosed(t, c, r)
}

func TestCloseEndsEverything(t *testing.T) {
	_, p := tcpEcho(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "x")
	p.Blackhole()
	send(t, c, "held")
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Held() == 1 }, "the write to be held")
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a blackholed connection")
	}
	expectClosed(t, c, r)
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
