package inbox_test

import (
	"context"
	"errors"
	"fmt"
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
	is.Equal(top.Count, int64(7))   // tenant-b's and the RETRYABLE one are not counted
	is.Equal(len(top.SampleIDs), 5) // newest first, at most DeadGroupSamples
	is.Equal(top.SampleIDs[0], currency[6])
	is.Equal(top.SampleIDs[4], currency[2])
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
