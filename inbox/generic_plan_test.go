package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A worker's connection plans its claim and its handler transaction's first
// statement once (generic plans), often while the queue holds a few rows,
// and keeps the plans until the tables are analyzed again. Planned on a
// nearly empty queue, they hash-joined over sequential scans of
// pginbox_work: when the queue then grew, every claim and every completion
// read all of it. Here the worker makes its plans on an empty queue, 20,000
// rows of another consumer are queued, and 50 more messages drain without a
// sequential read of those rows.
func TestGenericPlansStayOnIndexesAsTheQueueGrows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	clientPool, dsn := newPool(t)
	withoutAutovacuum(t, clientPool)
	client := newClient(t, clientPool, inbox.Config{})
	batch := func(from, n int) {
		for i := range n {
			acceptAll(t, client, orderMsg(fmt.Sprint("evt-", from+i), raw(`{"orderId":"o-1"}`)))
		}
	}

	workerPool := poolFor(t, dsn)
	w := newWorker(t, workerPool, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{Concurrency: 2, MessagesPerTx: 5, PollInterval: 50 * time.Millisecond})
	batch(0, 4)
	is.NoErr(w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(ctx) })
	testkit.Eventually(t, 20*time.Second, func() bool {
		return countRows(t, clientPool, "status = 'COMPLETED'") == 4
	}, "the first messages COMPLETED")

	const queued = 20_000
	_, err := clientPool.Exec(ctx, `
INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload)
SELECT gen_random_uuid(), 'tenant', 'tenant-b', 'elsewhere', 'billing.v1', 'm-' || g,
    'invoice.created', 1, sha256(g::text::bytea), '{}'
FROM generate_series(1, $1::int) g`, queued)
	is.NoErr(err)
	_, err = clientPool.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
SELECT id, scope_kind, scope_id, consumer, max_attempts FROM pginbox_receipts WHERE consumer = 'billing.v1'`)
	is.NoErr(err)
	before := tableStat(t, dsn, false, workSeqRead)

	batch(4, 50)
	testkit.Eventually(t, 30*time.Second, func() bool {
		// Not pginbox_receipts_live, whose join would read pginbox_work.
		var n int
		is.NoErr(clientPool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'").Scan(&n))
		return n == 54
	}, "the next 50 COMPLETED")
	is.NoErr(w.Stop(ctx))
	workerPool.Close() // its server processes report their reads as they exit
	clientPool.Close()

	read := tableStat(t, dsn, true, workSeqRead) - before
	t.Logf("draining 50 messages read %d rows of pginbox_work sequentially", read)
	if read >= queued {
		t.Fatalf("draining 50 messages read %d rows of pginbox_work sequentially (%d queued): a plan made on the empty queue scans it", read, queued)
	}
}

// A tenant's completed receipts stay in pginbox_receipts (its history). The
// handler transaction's first statement, planned while the table held a few
// rows, found the receipts it completes by the scope alone, and every
// completion then read the scope's whole history until the table was
// analyzed again. Here the worker makes its plans on 100 receipts, the
// table grows through the worker (which has its connections plan again on
// the way), then the scope gains 100,000 completed receipts and 50 more
// messages drain without reading them.
func TestGenericPlansStayOnKeysAsReceiptsAccumulate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	clientPool, dsn := newPool(t)
	withoutAutovacuum(t, clientPool)
	client := newClient(t, clientPool, inbox.Config{})
	accepted := 0
	batch := func(n int) {
		msgs := make([]inbox.Message, n)
		for i := range msgs {
			msgs[i] = orderMsg(fmt.Sprint("evt-", accepted+i), raw(`{"orderId":"o-1"}`))
		}
		_, err := client.AcceptBatch(ctx, msgs)
		is.NoErr(err)
		accepted += n
	}
	// Drained, read from pginbox_work alone: the test reads no receipts.
	drained := func() bool {
		var queued int
		is.NoErr(clientPool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work").Scan(&queued))
		return queued == 0
	}

	workerPool := poolFor(t, dsn)
	w := newWorker(t, workerPool, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: 1, PollInterval: 50 * time.Millisecond})
	batch(100)
	is.NoErr(w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(ctx) })
	testkit.Eventually(t, 20*time.Second, drained, "the first messages COMPLETED")
	for range 11 {
		batch(100)
	}
	testkit.Eventually(t, 60*time.Second, drained, "1,200 messages COMPLETED")

	const history = 100_000
	conn, err := clientPool.Acquire(ctx)
	is.NoErr(err)
	_, err = conn.Exec(ctx, `
INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, status, completed_at)
SELECT gen_random_uuid(), 'tenant', 'tenant-a', 'orders-service', 'orders.projection.v1', 'old-' || g,
    'order.created', 1, sha256(g::text::bytea), '{}', 'COMPLETED', now()
FROM generate_series(1, $1::int) g`, history)
	is.NoErr(err)
	// Sessions report their reads late (an idle one within 10 s): the
	// insert's are sent now. The worker's sessions may report reads of the
	// first 1,200 completions after this point, and they are counted below:
	// a few thousand blocks at most, far under the bound.
	_, err = conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	is.NoErr(err)
	conn.Release()
	before := tableStat(t, dsn, false, receiptsBlocks)

	for range 10 {
		batch(5)
	}
	testkit.Eventually(t, 30*time.Second, drained, "the next 50 COMPLETED")
	is.NoErr(w.Stop(ctx))
	workerPool.Close() // its server processes report their reads as they exit
	clientPool.Close()

	read := tableStat(t, dsn, true, receiptsBlocks) - before
	t.Logf("accepting and draining 50 messages read %d blocks of pginbox_receipts", read)
	// Once per completion would be 50 x history; the rest is reads the
	// worker's sessions made earlier and reported late.
	if read >= 10*history {
		t.Fatalf("accepting and draining 50 messages read %d blocks of pginbox_receipts (%d completed receipts in the scope): a plan made on a small table reads the scope's history at every completion", read, history)
	}
}

// withoutAutovacuum turns autovacuum off on both tables: its ANALYZE would
// have the worker's plans made again.
func withoutAutovacuum(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `ALTER TABLE pginbox_work SET (autovacuum_enabled = false);
		ALTER TABLE pginbox_receipts SET (autovacuum_enabled = false)`)
	if err != nil {
		t.Fatal(err)
	}
}

const (
	workSeqRead    = "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'pginbox_work'"
	receiptsBlocks = `SELECT heap_blks_read + heap_blks_hit + idx_blks_read + idx_blks_hit
		FROM pg_statio_user_tables WHERE relname = 'pginbox_receipts'`
)

// tableStat reads one statistic of the database's tables (query returns one
// bigint); with alone, once every other session of the database has ended
// (a session reports its reads when idle or at exit).
func tableStat(t *testing.T, dsn string, alone bool, query string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	testkit.Eventually(t, 20*time.Second, func() bool {
		var others int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return others == 0 || !alone
	}, "the tables' read statistics")
	return n
}
