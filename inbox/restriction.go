package inbox

import (
	"context"
	"time"

	"github.com/pginbox/pginbox/db"
)

// restrictionWatch notices a SystemPool that row-level security starts to
// restrict while the worker runs (tenancy enabled under a running worker,
// the role's BYPASSRLS taken away): its claims would find nothing, and the
// worker would look idle instead of failing. Only the claim loop uses it.
type restrictionWatch struct {
	next       time.Time // no check before then
	restricted bool
}

// watchRestriction runs after a claim that found nothing, at most twice per
// PollInterval: an idle worker claims once per poll, so a restriction is
// reported within one poll of the change. It logs an error and publishes
// EventRestricted when the restriction begins, and logs when it ends.
func (w *Worker) watchRestriction(ctx context.Context) {
	now := time.Now()
	if now.Before(w.restriction.next) {
		return
	}
	w.restriction.next = now.Add(w.cfg.PollInterval / 2)
	cctx, cancel := context.WithTimeout(ctx, bookkeepingTimeout)
	defer cancel()
	restricted, err := db.New(w.sys).ScopeRestricted(cctx)
	if err != nil || restricted == w.restriction.restricted {
		return // a database that does not answer fails the next claim
	}
	w.restriction.restricted = restricted
	if !restricted {
		w.log.Info("pginbox worker: row-level security no longer restricts the SystemPool's role: claims see every scope again")
		return
	}
	err = errWorkerRestricted{}
	w.log.Error("pginbox worker: claims find nothing because row-level security now restricts the SystemPool's role", "error", err)
	w.events.publish(Event{Kind: EventRestricted, Err: err})
}
