package relaytest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/internal/drill"
)

// CutDrill is the publishers' connection-cut drill, with a relay on pool
// already running and publishing through proxy: events for destination are
// emitted in three waves, and the publisher's connection is cut twice, the
// second time with reconnects refused for a while. Each wave comes after a
// fault, so the relay has work that only a reconnected publisher can do, and
// each cut waits for a live connection (a relay that published everything
// and a client that has not reconnected yet leave nothing to cut). It
// returns when every event is published.
func CutDrill(t testing.TB, pool *pgxpool.Pool, proxy *faultproxy.Proxy, destination string) Emitted {
	t.Helper()
	e := Emit(t, pool, destination, 160)
	drill.Eventually(t, 30*time.Second, "80 events published", func() bool { return Published(t, pool) >= 80 })
	drill.Cut(t, proxy)
	e.More(t, pool, destination, 160)
	drill.Eventually(t, 30*time.Second, "200 events published", func() bool { return Published(t, pool) >= 200 })
	drill.Down(t, proxy)
	e.More(t, pool, destination, 80) // tried while the server refuses connections
	time.Sleep(300 * time.Millisecond)
	proxy.Resume()
	drill.Eventually(t, 60*time.Second, "every event published", func() bool { return Published(t, pool) == len(e.IDs) })
	if proxy.CutCount() < 2 {
		t.Fatalf("%d connections cut, want 2", proxy.CutCount())
	}
	return e
}
