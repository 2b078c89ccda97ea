package drill

import (
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
)

// cutWait is how long Cut and Down wait for a connection to cut.
const cutWait = 30 * time.Second

// Cut waits until a connection passes through p, closes every open one and
// returns how many it closed (at least one). A client between two
// connections (reconnecting after an earlier fault) has nothing to cut: the
// drill waits for the fault to be possible instead of injecting nothing.
func Cut(t testing.TB, p *faultproxy.Proxy) int {
	t.Helper()
	return cut(t, p, false)
}

// Down is Cut with the server down: p refuses new connections from the
// moment the live ones are cut, until Resume.
func Down(t testing.TB, p *faultproxy.Proxy) int {
	t.Helper()
	return cut(t, p, true)
}

func cut(t testing.TB, p *faultproxy.Proxy, refuse bool) int {
	t.Helper()
	deadline := time.Now().Add(cutWait)
	for {
		if p.Open() > 0 {
			if refuse {
				p.Refuse()
			}
			if n := p.Cut(); n > 0 {
				return n
			}
			// The connection closed between Open and Cut: let the client
			// open another and try again.
			if refuse {
				p.Resume()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection to cut within %v (%d accepted so far)", cutWait, p.Accepted())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
