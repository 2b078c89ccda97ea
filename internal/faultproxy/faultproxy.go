// Package faultproxy is a TCP proxy for fault-injection tests. It listens on
// 127.0.0.1, forwards every connection to one upstream address (TCP or a unix
// socket), and lets the test break the network between the two:
//
//   - Cut closes every open connection on both sides, as a reset or a crashed
//     middlebox would. Connections made afterwards pass.
//   - Blackhole stops forwarding in both directions while keeping every socket
//     open, as a partition does: writes still succeed (they land in socket
//     buffers), reads wait. New connections are accepted but get no answer.
//   - Resume ends a blackhole (or Refuse). Data held during the blackhole is
//     delivered then, in order, as TCP retransmission delivers it when a short
//     partition heals. A connection cut while blackholed loses what was held.
//   - Refuse closes new connections as soon as they are accepted, as a dead
//     server does; open connections are left alone (Cut them too for "down").
//
// A Proxy is safe for concurrent use. It is test infrastructure: it favours
// predictable behaviour over throughput.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections from its listener to the upstream address.
type Proxy struct {
	ln               net.Listener
	network, address string // upstream

	mu       sync.Mutex
	gate     chan struct{} // closed while traffic passes
	refusing bool
	closed   bool
	cutGen   uint64 // incremented by every Cut
	links    map[*link]struct{}

	wg sync.WaitGroup // accept loop and every link goroutine

	accepted atomic.Int64
	cut      atomic.Int64
	held     atomic.Int64
}

// New starts a proxy on 127.0.0.1 (a free port) to upstream network/address,
// e.g. ("unix", "/tmp/pg/.s.PGSQL.5432") or ("tcp", "127.0.0.1:5432"). Traffic
// passes until told otherwise. Close it when done.
func New(network, address string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{
		ln:      ln,
		network: network,
		address: address,
		gate:    gate,
		links:   make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the listening address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the listening port.
func (p *Proxy) Port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// Cut closes every open connection on both sides and reports how many it
// closed. Data held by a blackhole on those connections is lost. The mode
// (passing, blackholed, refusing) is unchanged.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	p.cutGen++
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	p.cut.Add(int64(len(links)))
	return len(links)
}

// Blackhole stops forwarding in both directions, on open and new connections,
// until Resume. Sockets stay open.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate: // passing: close the gate
		p.gate = make(chan struct{})
	default: // already blackholed
	}
}

// Refuse makes the proxy close new connections at once, until Resume.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.refusing = true
	p.mu.Unlock()
}

// Resume lets traffic pass again: it ends a blackhole, delivering what was
// held, and ends Refuse.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Accepted is how many connections the proxy has accepted (refused ones
// included).
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// CutCount is how many connections Cut has closed.
func (p *Proxy) CutCount() int64 { return p.cut.Load() }

// Open is how many connections are currently forwarded.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Held is how many reads (one per direction of a connection at most) are
// waiting at the blackhole to be forwarded.
func (p *Proxy) Held() int64 { return p.held.Load() }

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		p.accepted.Add(1)
		p.mu.Lock()
		refuse, gen := p.refusing || p.closed, p.cutGen
		if !refuse {
			p.wg.Add(1) // under mu: Close cannot be waiting yet
		}
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		go p.serve(c, gen)
	}
}

// serve connects c upstream and forwards until either side closes or a Cut.
// gen is the Cut generation when c was accepted: a Cut during the upstream
// dial applies to c too.
func (p *Proxy) serve(c net.Conn, gen uint64) {
	defer p.wg.Done()
	up, err := net.DialTimeout(p.network, p.address, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, upstream: up, done: make(chan struct{})}
	p.mu.Lock()
	if p.cutGen != gen || p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	var dirs sync.WaitGroup
	dirs.Add(2)
	go func() { defer dirs.Done(); p.pipe(l, up, c) }()
	go func() { defer dirs.Done(); p.pipe(l, c, up) }()
	dirs.Wait()
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// currentGate is closed while traffic passes.
func (p *Proxy) currentGate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate
}

// pipe copies src to dst through the gate. At src's EOF it half-closes dst so
// that a reply still in flight the other way is delivered; on any other error
// it closes the whole link.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			p.held.Add(1)
			select {
			case <-p.currentGate():
			case <-l.done:
			}
			p.held.Add(-1)
			select {
			case <-l.done: // cut while held: the data is lost
				return
			default:
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				l.close()
				return
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				if hc, ok := dst.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
					return
				}
			}
			l.close()
			return
		}
	}
}

// link is one proxied connection.
type link struct {
	client, upstream net.Conn
	once             sync.Once
	done             chan struct{} // closed by close
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.upstream.Close()
	})
}
