package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/pgtest"
	"github.com/pginbox/pginbox/schema"
)

func main() {
	ctx := context.Background()
	cl, err := pgtest.Start(ctx, pgtest.Options{Fsync: true})
	if err != nil { panic(err) }
	defer cl.Stop()
	dsn := cl.ConnString("postgres")
	if err := schema.UpDSN(ctx, dsn); err != nil { panic(err) }
	cfgp, _ := pgxpool.ParseConfig(dsn)
	cfgp.MaxConns = 70
	pool, _ := pgxpool.NewWithConfig(ctx, cfgp)
	payload := `{"amount":"12345.67","currency":"EUR","customerId":"cus_0000001234","items":[{"qty":2,"sku":"SKU-000123"},{"qty":1,"sku":"SKU-000456"}],"note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","orderId":"ord_000000001234"}`
	run := 0
	for _, callers := range []int{8, 64, 256} {
	for rep := 0; rep < 1; rep++ {
	for _, fl := range []int{1, 2} {
		for _, mb := range []int{100} {
			for _, wait := range []time.Duration{0, time.Millisecond} {
				run++
				c, _ := inbox.NewClient(pool, inbox.Config{Logger: slog.New(slog.DiscardHandler), GroupCommit: true, GroupCommitFlushers: fl, GroupCommitMaxBatch: mb, GroupCommitMaxWait: wait})
				const calls = 6000
				var next atomic.Int64
				lat := make([][]time.Duration, callers)
				var wg sync.WaitGroup
				t0 := time.Now()
				for w := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1)
							if i > calls { return }
							m := inbox.Message{Identity: inbox.Identity{Scope: inbox.Tenant("t"), Source: "s", Consumer: "c", MessageID: fmt.Sprintf("r%d-%d", run, i)}, EventType: "e", SchemaVersion: 1, Payload: json.RawMessage(payload)}
							s := time.Now()
							if _, err := c.Accept(ctx, m); err != nil { panic(err) }
							lat[w] = append(lat[w], time.Since(s))
						}
					}()
				}
				wg.Wait()
				el := time.Since(t0)
				var all []time.Duration
				for _, l := range lat { all = append(all, l...) }
				slices.Sort(all)
				fmt.Printf("callers=%d flushers=%d maxbatch=%d wait=%v: %.0f/s p50=%v p95=%v\n", callers, fl, mb, wait, calls/el.Seconds(), all[len(all)/2].Round(time.Microsecond*100), all[len(all)*95/100].Round(100*time.Microsecond))
			}
		}
	}
	}
	}
	os.Exit(0)
}
