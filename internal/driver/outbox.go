package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// Outbox runs the outbox's statements whose form depends on the layout.
type Outbox interface {
	// Insert inserts an emitted event on q, the emitting transaction.
	Insert(ctx context.Context, q *db.Queries, p db.OutboxEventInsertParams) error
	// NewClaimer returns a relay's claims.
	NewClaimer(cfg RelayClaimerConfig) RelayClaimer
	// Settle marks, fails and releases claimed events, each fenced by its
	// claim token.
	Settle(ctx context.Context, pool *pgxpool.Pool, s Settlement) (Settled, error)
	// Recover returns events whose lease expired to PENDING (or DEAD when
	// their attempts are spent).
	Recover(ctx context.Context, pool *pgxpool.Pool, maxAttempts int32) ([]db.OutboxRecoverRow, error)
	// Purge deletes events published before cutoff, size per statement,
	// until none are left; progress, if set, gets the running total.
	Purge(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, size int, progress func(int64)) (int64, error)
}

// RelayClaimerConfig is what a relay's claims need.
type RelayClaimerConfig struct {
	// Lease is how long a claim holds its events.
	Lease time.Duration
	// Listed, when set, sees the scope count of each read of the scopes
	// with due events (Citus; tests).
	Listed func(scopes int)
}

// RelayClaimer claims due events for one relay. Only one goroutine claims
// at a time.
type RelayClaimer interface {
	// Claim claims up to n due events. Rows returned with an error are
	// committed (Citus: some scopes failed, the others claimed).
	Claim(ctx context.Context, pool *pgxpool.Pool, n int) ([]db.OutboxClaimRow, error)
	// Woke records a wake-up at t, as Claimer.Woke.
	Woke(t time.Time)
}

// Settlement is what a relay records after a batch.
type Settlement struct {
	Published, Released []Fence        // the events to mark PUBLISHED, and to hand back
	Failed              []EventFailure // the events whose publish failed
	MaxAttempts         int32          // the retry budget
}

// Fence names a claimed event: its ID, claim token and scope.
type Fence struct {
	ID, Token string // UUID text
	ScopeID   string // the event's scope
}

// EventFailure is a failed publish: retried after Delay, or DEAD.
type EventFailure struct {
	Fence
	Error string        // stored as the event's last error
	Delay time.Duration // until the retry
	Dead  bool          // no retry
}

// Settled is what Settle recorded.
type Settled struct {
	// Marked counts the events marked PUBLISHED; Lost those whose lease
	// was lost before (they will be published again).
	Marked, Lost int
	// Failed are the failures recorded.
	Failed []db.OutboxFailRow
}

const (
	// outboxScopesMax bounds the scopes one listing on Citus returns.
	outboxScopesMax = 16
	recoverBatch    = 100
)

type postgresOutbox struct{}

func (postgresOutbox) Insert(ctx context.Context, q *db.Queries, p db.OutboxEventInsertParams) error {
	_, err := q.OutboxEventInsert(ctx, p)
	return err
}

func (postgresOutbox) NewClaimer(cfg RelayClaimerConfig) RelayClaimer { return outboxTurn(cfg) }

// outboxTurn is the relay's claim on one server: one statement across
// scopes (OutboxClaim) in a transaction of its own that does not wait for
// its WAL flush (pipetx.Async). Losing one in a server crash only returns
// the events to PENDING, and the durable commit of the mark flushes the
// claim before it anyway.
type outboxTurn RelayClaimerConfig

// Woke does nothing: every claim reads afresh.
func (outboxTurn) Woke(time.Time) {}

func (c outboxTurn) Claim(ctx context.Context, pool *pgxpool.Pool, n int) ([]db.OutboxClaimRow, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return db.New(pipetx.Async{Conn: conn.Conn()}).OutboxClaim(ctx, db.OutboxClaimParams{
		LeaseMs:  c.Lease.Milliseconds(),
		MaxCount: int32(n),
	})
}

func (postgresOutbox) Settle(ctx context.Context, pool *pgxpool.Pool, s Settlement) (Settled, error) {
	q := db.New(pool)
	var out Settled
	var errs []error
	if len(s.Published) > 0 {
		ids, tokens := fences(s.Published)
		marked, err := q.OutboxMarkPublished(ctx, db.OutboxMarkPublishedParams{Ids: ids, Tokens: tokens})
		if err != nil {
			errs = append(errs, fmt.Errorf("mark published: %w", err))
		} else {
			out.Marked, out.Lost = len(marked), len(ids)-len(marked)
		}
	}
	if len(s.Failed) > 0 {
		p := db.OutboxFailParams{MaxAttempts: s.MaxAttempts}
		for _, f := range s.Failed {
			p.Ids = append(p.Ids, f.ID)
			p.Tokens = append(p.Tokens, f.Token)
			p.Errors = append(p.Errors, f.Error)
			p.DelaysMs = append(p.DelaysMs, f.Delay.Milliseconds())
			p.Dead = append(p.Dead, f.Dead)
		}
		rows, err := q.OutboxFail(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("recording the failures: %w", err))
		}
		out.Failed = rows
	}
	if len(s.Released) > 0 {
		ids, tokens := fences(s.Released)
		if _, err := q.OutboxRelease(ctx, db.OutboxReleaseParams{Ids: ids, Tokens: tokens}); err != nil {
			errs = append(errs, fmt.Errorf("release: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

func fences(fs []Fence) (ids, tokens []string) {
	for _, f := range fs {
		ids = append(ids, f.ID)
		tokens = append(tokens, f.Token)
	}
	return ids, tokens
}

func (postgresOutbox) Recover(ctx context.Context, pool *pgxpool.Pool, maxAttempts int32) ([]db.OutboxRecoverRow, error) {
	var out []db.OutboxRecoverRow
	for {
		rows, err := db.New(pool).OutboxRecover(ctx, db.OutboxRecoverParams{MaxAttempts: maxAttempts, MaxCount: recoverBatch})
		out = append(out, rows...)
		if err != nil {
			return out, fmt.Errorf("recover: %w", err)
		}
		if len(rows) < recoverBatch {
			return out, nil
		}
	}
}

func (postgresOutbox) Purge(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, size int, progress func(int64)) (int64, error) {
	q := db.New(pool)
	var total int64
	for {
		n, err := q.OutboxPurge(ctx, db.OutboxPurgeParams{Cutoff: cutoff, MaxCount: int32(size)})
		if err != nil {
			return total, fmt.Errorf("purge: %w", err)
		}
		total += n
		if n > 0 && progress != nil {
			progress(total)
		}
		if n < int64(size) {
			return total, nil
		}
	}
}
