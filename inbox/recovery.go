package inbox

import (
	"context"

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
	const batch = 100
	total := 0
	for {
		// The scopes with expired leases (a read that locks nothing), then
		// each scope's recovery in a statement of its own: on Citus, on its
		// scope's node.
		scopes, err := db.New(pipetx.FanOut{Pool: w.sys}).ReceiptExpiredScopes(ctx, db.ReceiptExpiredScopesParams{Consumers: w.owned, MaxCount: batch})
		if err != nil {
			return total, dbError("recover", err)
		}
		full := false
		for _, sid := range scopes {
			n, err := w.recoverScope(ctx, sid, batch)
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

// recoverScope recovers up to batch expired leases of one scope.
func (w *Worker) recoverScope(ctx context.Context, scopeID string, batch int32) (int, error) {
	rows, err := db.New(w.sys).ReceiptRecover(ctx, db.ReceiptRecoverParams{Consumers: w.owned, MaxCount: batch, ScopeID: scopeID})
	if err != nil {
		return 0, dbError("recover", err)
	}
	for _, r := range rows {
		w.log.Warn("pginbox worker: recovered an expired lease", "receipt_id", r.ID, "consumer", r.Consumer, "status", r.Status)
		w.events.publish(Event{Kind: EventRecovered, ReceiptID: r.ID, Consumer: r.Consumer})
	}
	if len(rows) > 0 {
		service.Signal(w.wake)
	}
	return len(rows), nil
}
