package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
)

func TestAdminDeadGroups(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	adm := admNew(t, pool)

	kill := func(tenant, msgID, consumer, lastError string) inbox.ID {
		m := admTenantMsg(tenant, msgID, raw(`{"orderId":"o-1"}`))
		m.Consumer = consumer
		id := admAccept(t, c, m)
		if lastError == "" {
			admSet(t, pool, id, "status = 'DEAD', last_error = NULL")
		} else {
			admSet(t, pool, id, "status = 'DEAD', last_error = $2", lastError)
		}
		return id
	}
	var currency []inbox.ID
	for i := range 7 {
		currency = append(currency, kill("tenant-a", fmt.Sprintf("cur-%d", i), "orders.projection.v1", "unsupported currency"))
	}
	kill("tenant-a", "dec-1", "orders.projection.v1", "decoding failed")
	kill("tenant-a", "bill-1", "billing.v1", "unsupported currency") // same text, other consumer
	kill("tenant-a", "none-1", "billing.v1", "")
	kill("tenant-b", "cur-x", "orders.projection.v1", "unsupported currency")
	// Not DEAD: never grouped.
	live := admAccept(t, c, admTenantMsg("tenant-a", "retry-1", raw(`{}`)))
	admSet(t, pool, live, "status = 'RETRYABLE', last_error = 'unsupported currency'")

	res, err := adm.ForTenant("tenant-a").DeadGroups(ctx, inbox.DeadGroupsParams{})
	is.NoErr(err)
	is.True(!res.Truncated)
	is.Equal(len(res.Groups), 4)
	top := res.Groups[0] // largest first
	is.Equal(top.Consumer, "orders.projection.v1")
	is.Equal(top.LastError, "unsupported currency")
	is.Equal(top.ErrorShape, "unsupported currency")
	is.Equal(top.Count, int64(7)) // tenant-b's and the RETRYABLE one are not counted
	is.Equal(top.Texts, int64(1))
	is.Equal(len(top.Samples), 5) // newest first, at most DeadGroupSamples
	is.Equal(top.Samples[0], inbox.DeadSample{ID: currency[6], LastError: "unsupported currency"})
	is.Equal(top.Samples[4].ID, currency[2])
	is.True(!top.FirstDeadAt.After(top.LastDeadAt))
	var sawEmpty bool
	for _, g := range res.Groups[1:] {
		is.Equal(g.Count, int64(1))
		sawEmpty = sawEmpty || (g.Consumer == "billing.v1" && g.LastError == "")
	}
	is.True(sawEmpty) // a DEAD receipt without an error text is its own group

	// The operator view sees tenant-b too; the consumer filter narrows.
	res, err = adm.Operator().DeadGroups(ctx, inbox.DeadGroupsParams{Consumer: "orders.projection.v1"})
	is.NoErr(err)
	is.Equal(len(res.Groups), 2)
	is.Equal(res.Groups[0].Count, int64(8))

	// tenant-b sees only its own receipt.
	res, err = adm.ForTenant("tenant-b").DeadGroups(ctx, inbox.DeadGroupsParams{})
	is.NoErr(err)
	is.Equal(len(res.Groups), 1)
	is.Equal(res.Groups[0].Count, int64(1))

	// A limit below the number of groups says so.
	res, err = adm.ForTenant("tenant-a").DeadGroups(ctx, inbox.DeadGroupsParams{Limit: 2})
	is.NoErr(err)
	is.Equal(len(res.Groups), 2)
	is.True(res.Truncated)

	for _, limit := range []int{-1, inbox.MaxDeadGroupsLimit + 1} {
		_, err = adm.Operator().DeadGroups(ctx, inbox.DeadGroupsParams{Limit: limit})
		var ve *inbox.ValidationError
		is.True(errors.As(err, &ve))
		is.Equal(ve.Field, "limit")
	}
	_, err = adm.ForTenant("").DeadGroups(ctx, inbox.DeadGroupsParams{})
	is.True(errors.Is(err, inbox.ErrInvalid))
}

// Errors that embed an ID or a number are one group: their shape, with the
// exact texts of the newest receipts beside it.
func TestAdminDeadGroupsByShape(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	adm := admNew(t, pool)
	n := 0
	kill := func(consumer, lastError string) inbox.ID {
		n++
		m := admTenantMsg("tenant-a", fmt.Sprintf("m-%d", n), raw(`{"orderId":"o-1"}`))
		m.Consumer = consumer
		id := admAccept(t, c, m)
		admSet(t, pool, id, "status = 'DEAD', last_error = $2", lastError)
		return id
	}
	var orders []inbox.ID
	for i := range 84 {
		orders = append(orders, kill("orders.v1", fmt.Sprintf("order %d not found (after %d attempts)", 1000+i*37, i%3+1)))
	}
	for _, id := range []string{"550e8400-e29b-41d4-a716-446655440000", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"} {
		kill("orders.v1", "customer "+id+" is blocked")
	}
	for _, id := range []string{"01JB8ZK6Q0W5T3V1S9R7P2M4N8", "01jb8zm0000000000000000000"} {
		kill("orders.v1", "receipt "+id+" replay refused")
	}
	for _, trace := range []string{"4bf92f3577b34da6a3ce929d0e0e1009", "00f067aa0ba902b7"} {
		kill("orders.v1", "upstream 503 (trace "+trace+")")
	}
	kill("billing.v1", "order 7 not found (after 1 attempts)") // same shape, other consumer
	// Words and letters are kept: these differ in shape.
	kill("orders.v1", "order o-1 not found")
	kill("orders.v1", "ABCDEFGHJKMNPQRSTVWXYZ0123 is not a ULID")

	res, err := adm.ForTenant("tenant-a").DeadGroups(ctx, inbox.DeadGroupsParams{Consumer: "orders.v1"})
	is.NoErr(err)
	shapes := map[string]inbox.DeadGroup{}
	for _, g := range res.Groups {
		shapes[g.ErrorShape] = g
	}
	is.Equal(len(res.Groups), 6)
	top := res.Groups[0]
	is.Equal(top.ErrorShape, "order <n> not found (after <n> attempts)")
	is.Equal(top.Count, int64(84))
	is.Equal(top.Texts, int64(84))
	is.Equal(len(top.Samples), inbox.DeadGroupSamples)
	for i, s := range top.Samples { // the exact texts, newest first
		is.Equal(s.ID, orders[83-i])
		is.Equal(s.LastError, fmt.Sprintf("order %d not found (after %d attempts)", 1000+(83-i)*37, (83-i)%3+1))
	}
	is.Equal(top.LastError, top.Samples[0].LastError)
	for shape, count := range map[string]int64{
		"customer <uuid> is blocked":              2,
		"receipt <ulid> replay refused":           2,
		"upstream <n> (trace <hex>)":              2,
		"order o-<n> not found":                   1,
		"ABCDEFGHJKMNPQRSTVWXYZ<n> is not a ULID": 1,
	} {
		g, ok := shapes[shape]
		if !ok {
			t.Fatalf("no group %q in %+v", shape, shapes)
		}
		is.Equal(g.Count, count)
		is.Equal(g.Texts, count)
		is.Equal(len(g.Samples), int(count))
	}

	// Without the filter billing's receipt is a group of its own.
	res, err = adm.Operator().DeadGroups(ctx, inbox.DeadGroupsParams{})
	is.NoErr(err)
	is.Equal(len(res.Groups), 7)
}

// A filter no identity can have is refused as invalid, naming the field,
// instead of failing in PostgreSQL like an unreachable database.
func TestAdminFiltersRefuseBadText(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	view := admNew(t, pool).Operator()
	for _, bad := range []struct{ value, rule string }{
		{"\xff\xfe", "invalid_utf8"},
		{"a\x00b", "control_character"},
		{"tab\there", "control_character"},
		{strings.Repeat("c", inbox.MaxIdentityBytes+1), "too_long"},
	} {
		var ve *inbox.ValidationError
		_, err := view.DeadGroups(ctx, inbox.DeadGroupsParams{Consumer: bad.value})
		is.True(errors.As(err, &ve))
		is.Equal(ve.Field, "consumer")
		is.Equal(string(ve.Rule), bad.rule)
		_, err = view.List(ctx, inbox.ListParams{Consumer: bad.value})
		is.True(errors.As(err, &ve))
		is.Equal(ve.Field, "consumer")
		_, err = view.List(ctx, inbox.ListParams{Source: bad.value})
		is.True(errors.As(err, &ve))
		is.Equal(ve.Field, "source")
		is.Equal(string(ve.Rule), bad.rule)
	}
	// A valid name that no receipt has is simply no match.
	res, err := view.DeadGroups(ctx, inbox.DeadGroupsParams{Consumer: "no.such.consumer"})
	is.NoErr(err)
	is.Equal(len(res.Groups), 0)
}
