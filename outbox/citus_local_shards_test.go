package outbox_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/outbox"
)

// A Relay or outbox Admin on a Citus node that holds shards of the outbox
// says once that pginbox belongs on a coordinator without shards (as the
// inbox's Client, Worker and Admin do); on the coordinator nothing.
func TestCitusRelayWarnsOnANodeWithShards(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coord, node := citustest.CoordinatorAndNode(t, inboxtest.CitusDatabase(t))
	const sub = "holds shards of pginbox's tables"
	for _, c := range []struct {
		name string
		pool *pgxpool.Pool
		want int
	}{{"coordinator", coord, 0}, {"worker node", node, 1}} {
		for i := range 4 {
			emitAs(t, coord, fmt.Sprintf("tenant-%d", i), event("", i))
		}
		log := citustest.NewWarnings()
		r := newRelay(t, c.pool, &recorder{}, outbox.RelayConfig{Logger: slog.New(log)})
		drain(t, r)
		drain(t, r)
		if got := len(log.Matching(sub)); got != c.want {
			t.Errorf("%s: the relay warned %d times, want %d (warnings: %q)", c.name, got, c.want, log.All())
		}
		log = citustest.NewWarnings()
		admin, err := outbox.NewAdmin(c.pool, outbox.AdminConfig{Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := admin.Purge(ctx, outbox.PurgeParams{OlderThan: time.Hour}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if got := len(log.Matching(sub)); got != c.want {
			t.Errorf("%s: the admin warned %d times, want %d (warnings: %q)", c.name, got, c.want, log.All())
		}
	}
}
