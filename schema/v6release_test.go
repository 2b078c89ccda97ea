package schema_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inboxtype"
)

// The statements of the last release at schema v6 (this repository at commit
// 7113de3, its db package), which keep running while `inbox migrate up`
// upgrades the database under it. Their shapes decide which table each takes
// first: see TestMigrationGivesWayToAClaim.
const (
	v6Accept = `
WITH inserted AS (
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts
    ) VALUES (
        $2, $3, $4, $5, $6, $7,
        $8, $9, $10, $11, $12, $13
    )
    ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
    DO NOTHING
    RETURNING id, scope_kind, scope_id, consumer, max_attempts
), queued AS (
    INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    SELECT id, scope_kind, scope_id, consumer, max_attempts FROM inserted
    RETURNING receipt_id, consumer, status
)
SELECT q.receipt_id AS id, q.status,
    CASE WHEN $1::boolean
         THEN pg_notify('pginbox_receipt', q.consumer) IS NOT NULL
         ELSE false END AS notified
FROM queued q`

	v6Claim = `
WITH due AS (
    SELECT d.receipt_id
    FROM unnest($1::text[]) AS c (name)
    CROSS JOIN LATERAL (
        SELECT w.receipt_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = c.name
          AND w.status IN ('PENDING', 'RETRYABLE')
          AND w.available_at <= now()
        ORDER BY w.available_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ) d
    ORDER BY d.available_at
    LIMIT $2
), claimed AS (
    UPDATE pginbox_work w
    SET status = 'PROCESSING',
        claim_token = $3::uuid,
        lease_expires_at = now() + $4::bigint * interval '1 millisecond',
        attempts = w.attempts + 1,
        version = w.version + 1,
        updated_at = now()
    FROM due
    WHERE w.receipt_id = due.receipt_id
    RETURNING w.receipt_id, w.claim_token, w.attempts, w.max_attempts
)
SELECT r.id, c.claim_token, r.scope_kind, r.scope_id, r.source, r.consumer,
    r.message_id, r.event_type, r.schema_version, c.attempts, c.max_attempts,
    r.created_at
FROM claimed c
JOIN pginbox_receipts r ON r.id = c.receipt_id`

	v6ScopeApply = `
SELECT set_config('pginbox.tenant', $1::text, true),
    set_config('pginbox.global', $2::text, true)`

	v6Start = `
WITH held AS (
    SELECT unnest($1::text[])::uuid AS id,
           unnest($2::text[])::uuid AS token
), done AS (
    DELETE FROM pginbox_work w
    USING held
    WHERE w.receipt_id = held.id AND w.claim_token = held.token
    RETURNING w.receipt_id, w.attempts, w.version
)
UPDATE pginbox_receipts r
SET status = 'COMPLETED',
    attempts = done.attempts,
    last_error = NULL,
    completed_at = now(),
    updated_at = now(),
    version = done.version + 1
FROM done
WHERE r.id = done.receipt_id
RETURNING r.id, r.payload, r.metadata, pg_backend_pid() AS backend_pid`

	v6Heartbeat = `
WITH held AS (
    SELECT unnest($1::text[])::uuid AS id,
           unnest($2::text[])::uuid AS token
), extended AS (
    UPDATE pginbox_work w
    SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
    FROM (
        SELECT l.receipt_id
        FROM pginbox_work l
        JOIN held ON l.receipt_id = held.id AND l.claim_token = held.token
        FOR UPDATE OF l SKIP LOCKED
    ) AS owned
    WHERE w.receipt_id = owned.receipt_id
    RETURNING w.receipt_id
)
SELECT held.id AS lost_id
FROM held
WHERE NOT EXISTS (
    SELECT 1
    FROM pginbox_work w
    WHERE w.receipt_id = held.id AND w.claim_token = held.token
)`

	v6Recover = `
WITH expired AS (
    SELECT e.receipt_id
    FROM pginbox_work e
    WHERE e.status = 'PROCESSING'
      AND e.lease_expires_at < now()
      AND e.consumer = ANY ($1::text[])
    ORDER BY e.lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), recovered AS (
    UPDATE pginbox_work w
    SET status = CASE WHEN w.attempts >= w.max_attempts THEN 'DEAD' ELSE 'RETRYABLE' END,
        last_error = 'lease expired: the worker stopped heartbeating (crash, network loss or overload)',
        claim_token = NULL,
        lease_expires_at = NULL,
        available_at = now(),
        updated_at = now(),
        version = w.version + 1
    FROM expired
    WHERE w.receipt_id = expired.receipt_id
    RETURNING w.receipt_id, w.consumer, w.status, w.attempts, w.last_error, w.version
), settled AS (
    UPDATE pginbox_receipts r
    SET status = 'DEAD', attempts = v.attempts, last_error = v.last_error,
        version = v.version, updated_at = now()
    FROM recovered v
    WHERE r.id = v.receipt_id AND v.status = 'DEAD'
    RETURNING r.id
)
SELECT v.receipt_id AS id, v.consumer, v.status FROM recovered v`

	v6OutboxEmit = `
INSERT INTO pginbox_outbox (
    id, source, destination, ordering_key, event_type, schema_version, payload, metadata
)
SELECT $1::uuid, $2::text, $3::text, $4::text, $5::text, $6::integer, $7::text::json, $8::text::jsonb
WHERE CASE WHEN $4::text = '' THEN true
           ELSE pg_advisory_xact_lock(1885825378, hashtext($4::text)) IS NOT NULL
      END
ON CONFLICT (id) DO NOTHING
RETURNING id`
)

// upgradeConsumer is the consumer the upgrade tests' messages go to.
const upgradeConsumer = "upgrade.v1"

// handledTable records each handler run that committed: a message handled
// twice shows as two rows.
const handledTable = `CREATE TABLE handled (receipt_id uuid NOT NULL, by text NOT NULL)`

// fleet is the traffic of a deployment during an upgrade: accepts, and
// workers of the v6 release claiming, heartbeating, recovering and handling.
// Every database error is kept; deadlocks are also counted.
type fleet struct {
	pool      *pgxpool.Pool
	accepted  sync.Map // inboxtype.ID -> struct{}
	nAccepted atomic.Int64
	nHandled  atomic.Int64
	deadlocks atomic.Int64
	mu        sync.Mutex
	errs      []error
	wg        sync.WaitGroup // the workers
	accepters sync.WaitGroup
}

func (f *fleet) fail(what string, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
		f.deadlocks.Add(1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Errorf("%s: %w", what, err))
}

func (f *fleet) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

// scopeOf spreads messages over the global scope and two tenants.
func scopeOf(n int64) (kind, id string) {
	switch n % 3 {
	case 0:
		return "global", ""
	case 1:
		return "tenant", "t1"
	}
	return "tenant", "t2"
}

// accept accepts new messages with the v6 statement until ctx ends; each
// accept is a statement of its own, as Client.Accept sends it.
func (f *fleet) accept(ctx context.Context, name string) {
	f.accepters.Add(1)
	go func() {
		defer f.accepters.Done()
		for n := int64(0); ctx.Err() == nil; n++ {
			id := inboxtype.New()
			kind, scope := scopeOf(n)
			payload := fmt.Sprintf(`{"n":%d}`, n)
			fp := sha256.Sum256([]byte(payload))
			var got inboxtype.ID
			var status string
			var notified bool
			// Not cancelled by ctx: an accept that committed is recorded.
			err := f.pool.QueryRow(context.WithoutCancel(ctx), v6Accept, false, id, kind, scope, "upgrade-test", upgradeConsumer,
				fmt.Sprintf("%s-%d", name, n), "e", 1, fp[:], payload, "{}", 10).Scan(&got, &status, &notified)
			if err != nil {
				f.fail("v6 accept", err)
				continue
			}
			f.accepted.Store(got, struct{}{})
			f.nAccepted.Add(1)
		}
	}()
}

type v6Lease struct {
	id, token inboxtype.ID
	kind      string
	scope     string
}

// v6Worker runs the v6 release's Worker loops: claims in a transaction of
// their own (synchronous_commit off), handlers in a transaction that starts
// with ReceiptStart after the scope's settings in the same round trip,
// heartbeats and lease recovery.
type v6Worker struct {
	f      *fleet
	ready  chan v6Lease
	mu     sync.Mutex
	held   map[inboxtype.ID]inboxtype.ID // receipt -> claim token
	leaseM int64
}

func (f *fleet) startV6Worker(ctx context.Context, slots int) {
	w := &v6Worker{f: f, ready: make(chan v6Lease, 2*slots), held: map[inboxtype.ID]inboxtype.ID{}, leaseM: 5_000}
	f.wg.Add(3 + slots)
	go func() { defer f.wg.Done(); w.claimLoop(ctx) }()
	go func() { defer f.wg.Done(); w.tick(ctx, 50*time.Millisecond, w.heartbeat) }()
	go func() { defer f.wg.Done(); w.tick(ctx, 100*time.Millisecond, w.recover) }()
	for range slots {
		go func() {
			defer f.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case l := <-w.ready:
					w.handle(ctx, l)
				}
			}
		}()
	}
}

// claimLoop claims when the queue has room, at once again after a full
// claim, else after the release's shortest poll.
func (w *v6Worker) claimLoop(ctx context.Context) {
	for ctx.Err() == nil {
		n := cap(w.ready) - len(w.ready)
		got := 0
		if n > 0 {
			got = w.claim(ctx, n)
		}
		if got < n || n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

func (w *v6Worker) claim(ctx context.Context, n int) int {
	var leases []v6Lease
	err := pgx.BeginTxFunc(ctx, w.f.pool, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}, func(tx pgx.Tx) error {
		leases = leases[:0]
		rows, err := tx.Query(ctx, v6Claim, []string{upgradeConsumer}, n, inboxtype.New(), w.leaseM)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l v6Lease
			var token inboxtype.ID
			var source, consumer, messageID, eventType string
			var schemaVersion, attempts, maxAttempts int32
			var created time.Time
			if err := rows.Scan(&l.id, &token, &l.kind, &l.scope, &source, &consumer, &messageID, &eventType,
				&schemaVersion, &attempts, &maxAttempts, &created); err != nil {
				return err
			}
			l.token = token
			leases = append(leases, l)
		}
		return rows.Err()
	})
	if err != nil {
		w.f.fail("v6 claim", err)
		return 0
	}
	w.mu.Lock()
	for _, l := range leases {
		w.held[l.id] = l.token
	}
	w.mu.Unlock()
	for _, l := range leases {
		w.ready <- l // room was checked; only this loop pushes
	}
	return len(leases)
}

// handle runs one receipt's handler transaction: ReceiptStart, the
// handler's own write (and an outbox event for some), a little work, commit.
// A receipt ReceiptStart no longer returns was lost: its handler does not run.
func (w *v6Worker) handle(ctx context.Context, l v6Lease) {
	defer func() {
		w.mu.Lock()
		delete(w.held, l.id)
		w.mu.Unlock()
	}()
	global := ""
	if l.kind == "global" {
		global = "on"
	}
	handled := false
	err := pgx.BeginFunc(ctx, w.f.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(v6ScopeApply, l.scope, global)
		b.Queue(v6Start, []string{l.id.UUIDString()}, []string{l.token.UUIDString()})
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return err
		}
		started := false
		for rows.Next() {
			started = true
		}
		rows.Close()
		if err := br.Close(); err != nil {
			return err
		}
		if !started {
			return nil // lost: recovered or claimed elsewhere
		}
		if _, err := tx.Exec(ctx, "INSERT INTO handled (receipt_id, by) VALUES ($1, 'v6')", l.id); err != nil {
			return err
		}
		if l.id[15]%4 == 0 { // some handlers emit an event
			if _, err := tx.Exec(ctx, v6OutboxEmit, inboxtype.New(), "upgrade-test", "out", "", "e", 1, "{}", "{}"); err != nil {
				return err
			}
		}
		// The handler's work, a load the migrations meet: the transaction
		// holds its locks meanwhile.
		time.Sleep(2 * time.Millisecond)
		handled = true
		return nil
	})
	if err != nil {
		w.f.fail("v6 handler transaction", err)
		return
	}
	if handled {
		w.f.nHandled.Add(1)
	}
}

func (w *v6Worker) tick(ctx context.Context, every time.Duration, fn func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

func (w *v6Worker) heartbeat(ctx context.Context) {
	w.mu.Lock()
	ids, tokens := make([]string, 0, len(w.held)), make([]string, 0, len(w.held))
	for id, token := range w.held {
		ids, tokens = append(ids, id.UUIDString()), append(tokens, token.UUIDString())
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	rows, err := w.f.pool.Query(ctx, v6Heartbeat, ids, tokens, w.leaseM)
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	w.f.fail("v6 heartbeat", err)
}

func (w *v6Worker) recover(ctx context.Context) {
	rows, err := w.f.pool.Query(ctx, v6Recover, []string{upgradeConsumer}, 100)
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	w.f.fail("v6 recovery", err)
}
