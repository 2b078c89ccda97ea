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
// emitted in three waves. Once half the first is published, the second is
// emitted and the publisher's live connection cut (the drill waits for one). After the second, the server goes down:
// live connections are cut and new ones refused until the relay has tried
// to reconnect at least once, with the third wave to publish. A publisher
// that opens connections per request (HTTP) may hold none when the server
// goes down, so the evidence for that fault is the refused attempt, not a
// cut. It returns when every event is published.
func CutDrill(t testing.TB, pool *pgxpool.Pool, proxy *faultproxy.Proxy, destination string) Emitted {
	t.Helper()
	e := Emit(t, pool, destination, 160)
	drill.Eventually(t, 30*time.Second, "80 events published", func() bool { return Published(t, pool) >= 80 })
	// The second wave before the cut: a client done with the first wave may
	// hold no connection by now (an HTTP client that closed its idle one),
	// and only new work would make it open one to cut.
	e.More(t, pool, destination, 160)
	drill.Cut(t, proxy)
	drill.Eventually(t, 30*time.Second, "200 events published", func() bool { return Published(t, pool) >= 200 })
	proxy.Refuse()
	proxy.Cut()
	attempts := proxy.Accepted() // from here on, every accepted connection is refused
	e.More(t, pool, destination, 80)
	drill.Eventually(t, 30*time.Second, "a reconnect refused while the server is down", func() bool { return proxy.Accepted() > attempts })
	proxy.Resume()
	drill.Eventually(t, 60*time.Second, "every event published", func() bool { return Published(t, pool) == len(e.IDs) })
	return e
}
