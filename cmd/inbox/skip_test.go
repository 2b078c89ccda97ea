package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// A DEAD head of an ordering key: stats count the receipt behind it, list
// and show say it waits, and skip lets it go (audited).
func TestSkipCommand(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	t.Cleanup(pool.Close)
	c, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	is.NoErr(err)
	var ids []inbox.ID
	for n := 1; n <= 2; n++ {
		res, err := c.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant("tenant-a"), Source: "shop", Consumer: "payments.v1", MessageID: fmt.Sprint("p-", n)},
			EventType: "payment.captured", SchemaVersion: 1, Payload: map[string]int{"n": n}, OrderingKey: "pay-1",
		})
		is.NoErr(err)
		ids = append(ids, res.ID)
	}
	inboxtest.SetState(t, pool, ids[0], "status = 'DEAD', last_error = 'declined'")
	db := map[string]string{"DATABASE_URL": dsn, "USER": "tester"}

	code, stdout, _ := runIn(t, db, "stats")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "blocked: 1"))
	code, stdout, _ = runIn(t, db, "list")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "PENDING (blocked)"))
	is.True(strings.Contains(stdout, "pay-1 #2"))
	code, stdout, _ = runIn(t, db, "show", ids[1].String())
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "ordering key"))
	is.True(strings.Contains(stdout, "waits"))

	code, stdout, _ = runIn(t, db, "show", ids[0].String(), "--json")
	is.Equal(code, exitOK)
	var d jsonDetails
	is.NoErr(json.Unmarshal([]byte(stdout), &d))
	is.Equal(d.OrderingKey, "pay-1")
	code, _, stderr := runIn(t, db, "skip", ids[0].String(), "--version", fmt.Sprint(d.Version+1), "--reason", "declined for good")
	is.Equal(code, exitRefused)
	is.True(strings.Contains(stderr, "version conflict"))
	code, stdout, _ = runIn(t, db, "skip", ids[0].String(), "--version", fmt.Sprint(d.Version), "--reason", "declined for good", "--json")
	is.Equal(code, exitOK)
	var sk jsonSkip
	is.NoErr(json.Unmarshal([]byte(stdout), &sk))
	is.True(sk.Promoted)
	is.Equal(sk.Status, "DEAD")

	code, stdout, _ = runIn(t, db, "list")
	is.Equal(code, exitOK)
	is.True(!strings.Contains(stdout, "(blocked)"))
	code, stdout, _ = runIn(t, db, "show", ids[0].String())
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "skip"))
	is.True(strings.Contains(stdout, "tester"))
}
