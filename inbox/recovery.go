package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/pipetx"
	"github.com/pginbox/pginbox/internal/service"
)

// recovery runs RecoverExpired at start and every RecoverInterval.
func (w *Worker) recovery() *service.Ticker {
	return &service.Ticker{Base: w.base, Interval: w.cfg.RecoverInterval, Jobs: []service.Job{{
		What: "lease recovery",
		Run: func(ctx context.Context) error {
			_, err := w.RecoverExpired(ctx)
			return err
		},
	}}}
}

// RecoverExpired returns receipts of the owned consumers whose lease expired to
// RETRYABLE (or DEAD when their attempts are spent) and reports how many. Every
// running worker does this periodically; no leader is needed.
func (w *Worker) RecoverExpired(ctx context.Context) (int, error) {
	if w.nodes == nil {
		return w.recoverOn(ctx, w.sys, func(ctx context.Context, p db.ReceiptExpiredScopesParams) ([]string, error) {
			return db.New(pipetx.FanOut{Pool: w.sys}).ReceiptExpiredScopes(ctx, p)
		})
	}
	// Node by node, each from its own shards: a node down holds back its
	// own expired leases only.
	total := 0
	var errs []error
	for i := range w.nodes.Count() {
		pool, err := w.nodes.n.Pool(w.sys, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := w.recoverOn(ctx, pool, func(ctx context.Context, p db.ReceiptExpiredScopesParams) ([]string, error) {
			return db.New(pool).ReceiptExpiredScopesLocal(ctx, db.ReceiptExpiredScopesLocalParams(p))
		})
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", w.nodes.n.Addr(i), err))
		}
	}
	return total, errors.Join(errs...)
}

// recoverOn recovers on pool: the scopes with expired leases (list, a read
// that locks nothing), then each scope's recovery in a statement of its own
// (on Citus, on its scope's node), until no scope has any left.
func (w *Worker) recoverOn(ctx context.Context, pool *pgxpool.Pool, list func(context.Context, db.ReceiptExpiredScopesParams) ([]string, error)) (int, error) {
	const batch = 100
	total := 0
	for {
		scopes, err := list(ctx, db.ReceiptExpiredScopesParams{Consumers: w.owned, MaxCount: batch})
		if err != nil {
			return total, dbError("recover", err)
		}
		full := false
		for _, sid := range scopes {
			n, err := w.recoverScope(ctx, pool, sid, batch)
			total += n
			if err != nil {
				return total, err
			}
			full = full || n == batch
		}
		if !full && len(scopes) < batch {
			return total, nil
		}
	}
}

// recoverScope recovers up to batch expired leases of one scope on pool.
func (w *Worker) recoverScope(ctx context.Context, pool *pgxpool.Pool, scopeID string, batch int32) (int, error) {
	rows, err := db.New(pool).ReceiptRecover(ctx, db.ReceiptRecoverParams{Consumers: w.owned, MaxCount: batch, ScopeID: scopeID})
	if err != nil {
		return 0, dbError("recover", err)
	}
	for _, r := range rows {
		w.log.Warn("pginbox worker: recovered an expired lease", "receipt_id", r.ID, "consumer", r.Consumer, "status", r.Status)
		w.events.publish(Event{Kind: EventRecovered, ReceiptID: r.ID, Consumer: r.Consumer})
	}
	if len(rows) > 0 {
		w.woke(-1)
		service.Signal(w.wake)
	}
	return len(rows), nil
}
