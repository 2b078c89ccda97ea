package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
)

// errRelayRestricted says what to do about a relay pool whose role
// row-level security restricts: its claims would see one scope or none.
var errRelayRestricted = fmt.Errorf("%w: the relay publishes every scope's events; "+
	"give NewRelay a pool whose role has BYPASSRLS (`inbox tenancy grant ROLE --system`)", inbox.ErrTenancyRestricted)

// restricted reports whether row-level security restricts the pool's role.
func (r *Relay) restricted(ctx context.Context) (bool, error) {
	restricted, err := db.New(r.pool).ScopeRestricted(ctx)
	if err != nil {
		return false, dbError("checking row-level security", err)
	}
	return restricted, nil
}

// restrictionWatch notices a pool that row-level security starts to
// restrict while the relay runs (tenancy enabled under a running relay):
// its claims would find nothing, and it would look idle instead of failing.
// Only the batch loop uses it.
type restrictionWatch struct {
	next       time.Time // no check before then
	restricted bool
}

// watchRestriction runs after a claim that found nothing, at most twice per
// PollInterval, so a restriction is logged within one poll of the change.
func (r *Relay) watchRestriction(ctx context.Context, w *restrictionWatch) {
	now := time.Now()
	if now.Before(w.next) {
		return
	}
	w.next = now.Add(r.cfg.PollInterval / 2)
	restricted, err := r.restricted(ctx)
	if err != nil || restricted == w.restricted {
		return // a database that does not answer fails the next claim
	}
	w.restricted = restricted
	if restricted {
		r.log.Error("pginbox relay: claims find nothing because row-level security now restricts the pool's role", "error", errRelayRestricted)
	} else {
		r.log.Info("pginbox relay: row-level security no longer restricts the pool's role: claims see every scope again")
	}
}
