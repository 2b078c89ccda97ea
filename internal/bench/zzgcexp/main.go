package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/pgtest"
	"github.com/pginbox/pginbox/schema"
)

const claim1 = `UPDATE pginbox_receipts r SET status='PROCESSING', claim_token=gen_random_uuid(), lease_expires_at=now()+interval '30s', attempts=r.attempts+1, version=r.version+1, updated_at=now()
FROM (SELECT id FROM pginbox_receipts WHERE status IN ('PENDING','RETRYABLE') AND available_at <= now() AND consumer = ANY($1::text[]) ORDER BY available_at LIMIT $2 FOR UPDATE SKIP LOCKED) due WHERE r.id = due.id RETURNING r.id, r.claim_token`

func main() {
	ctx := context.Background()
	cl, err := pgtest.Start(ctx, pgtest.Options{Fsync: true})
	if err != nil { panic(err) }
	defer cl.Stop()
	dsn := cl.ConnString("postgres")
	if err := schema.UpDSN(ctx, dsn); err != nil { panic(err) }
	pool, _ := pgxpool.New(ctx, dsn+" pool_max_conns=20")
	pool.Exec(ctx, "CREATE TABLE eff (id uuid primary key, m text)")
	for rep := 0; rep < 2; rep++ {
	for _, mode := range []string{"raw", "claim1-sync", "claim1-async", "claim10-sync"} {
		pool.Exec(ctx, "TRUNCATE pginbox_receipts CASCADE; TRUNCATE eff")
		pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, fingerprint, payload, metadata) SELECT gen_random_uuid(), 'tenant', 't', 's', 'c', 'm-' || i, 'e', 1, sha256(('m-' || i)::bytea), '{}'::jsonb, '{}' FROM generate_series(1, 3000) AS i`)
		pool.Exec(ctx, "CHECKPOINT")
		const conc = 4
		var done atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		ids := make(chan [2]pgx.Row, 0)
		_ = ids
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var batch [][16]byte
					switch mode {
					case "raw":
						var id [16]byte
						err := pool.QueryRow(ctx, "SELECT id FROM pginbox_receipts WHERE status='PENDING' LIMIT 1 FOR UPDATE SKIP LOCKED").Scan(&id)
						_ = err
						// emulate: raw takes an id without a claim (use a no-op select outside tx); update in tx guarded
						if err != nil { return }
						batch = append(batch, id)
					default:
						n := 1
						if mode == "claim10-sync" { n = 10 }
						var rows pgx.Rows
						var err error
						var tx pgx.Tx
						if mode == "claim1-async" {
							tx, _ = pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"})
							rows, err = tx.Query(ctx, claim1, []string{"c"}, n)
						} else {
							rows, err = pool.Query(ctx, claim1, []string{"c"}, n)
						}
						if err != nil { panic(err) }
						for rows.Next() { var id, tok [16]byte; rows.Scan(&id, &tok); batch = append(batch, id) }
						rows.Close()
						if tx != nil { tx.Commit(ctx) }
						if len(batch) == 0 { return }
					}
					for _, id := range batch {
						tx, _ := pool.Begin(ctx)
						tx.Exec(ctx, "INSERT INTO eff VALUES ($1, 'x')", id)
						tx.Exec(ctx, "UPDATE pginbox_receipts SET status='COMPLETED', completed_at=now(), updated_at=now(), version=version+1 WHERE id=$1", id)
						if err := tx.Commit(ctx); err != nil { /* raw mode races on the same id */ }
						done.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		fmt.Printf("%-13s %6.0f msg/s (%d)\n", mode, float64(done.Load())/time.Since(t0).Seconds(), done.Load())
	}
	}
}
