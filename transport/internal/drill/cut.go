package drill

import (
	"fmt"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/testkit"
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
	var n int
	testkit.Eventually(t, cutWait, func() bool {
		if p.Open() == 0 {
			return false
		}
		if refuse {
			p.Refuse()
		}
		if n = p.Cut(); n > 0 {
			return true
		}
		// The connection closed between Open and Cut: let the client
		// open another and try again.
		if refuse {
			p.Resume()
		}
		return false
	}, "a connection to cut (%v accepted so far)", testkit.Lazy(func() string { return fmt.Sprint(p.Accepted()) }))
	return n
}
