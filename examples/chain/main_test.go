package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/examples/chain/services"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.SetMigrate(services.Migrate)
	inboxtest.Main(m)
}

// The program on DATABASE_URL: one schema per service, every order through
// the chain, and the trace links each hop to the message that caused it.
func TestProgramOnDatabaseURL(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var out bytes.Buffer
	dsn := inboxtest.Database(t)
	is.NoErr(run(context.Background(), &out, options{databaseURL: dsn, orders: 3}))
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"each service gets its own schema there (chain_orders, chain_billing, chain_shipping)",
		"storefront -> orders: 3 orders accepted, 1 redelivery deduplicated",
		"all 3 orders went through orders, billing and shipping",
		"orders    3 chain_orders     3                   3",
		"billing   3 chain_invoices   3                   3",
		"shipping  3 chain_shipments  3                   - (end of the chain)",
	} {
		is.True(strings.Contains(text, want)) // the program's output names what happened
	}
	// Each hop's message ID is the event the hop before emitted, and causes
	// the next one; the correlation ID rides along.
	var hops [][]string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && (f[0] == "orders" || f[0] == "billing" || f[0] == "shipping") {
			hops = append(hops, f)
		}
	}
	is.Equal(len(hops), 3)
	is.Equal(hops[0][4], "-")        // the storefront's order has no cause
	is.Equal(hops[1][4], hops[0][3]) // billing's message was caused by orders' message
	is.Equal(hops[2][4], hops[1][3]) // shipping's by billing's
	is.Equal(hops[1][5], hops[0][5]) // one correlation ID
	is.Equal(hops[2][5], hops[0][5])

	// A second run on the same database keeps its orders apart.
	out.Reset()
	is.NoErr(run(context.Background(), &out, options{databaseURL: dsn, orders: 2}))
	is.True(strings.Contains(out.String(), "all 2 orders went through"))
}

func TestProgramRefusesBadOptions(t *testing.T) {
	is := is.New(t)
	err := run(context.Background(), &bytes.Buffer{}, options{databaseURL: "postgres://%zz", orders: 1})
	is.True(strings.Contains(err.Error(), "DATABASE_URL is not a valid PostgreSQL connection string"))
	err = run(context.Background(), &bytes.Buffer{}, options{orders: 0})
	is.True(strings.Contains(err.Error(), "-orders 0: want 1 to 10000"))
}

// Without DATABASE_URL the program starts its own PostgreSQL, one database
// per service, and removes it afterwards.
func TestProgramOnThrowawayCluster(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var out bytes.Buffer
	is.NoErr(run(context.Background(), &out, options{orders: 2}))
	is.True(strings.Contains(out.String(), "each service gets its own database: chain_orders, chain_billing, chain_shipping"))
	is.True(strings.Contains(out.String(), "all 2 orders went through"))
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
