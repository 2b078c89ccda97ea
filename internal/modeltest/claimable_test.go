package modeltest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// enabled is the model's claim action's enabled set in s: the receipts a
// claim may take (due PENDING or RETRYABLE work rows no transaction holds).
// Every other receipt is out of a claim's reach: a claimed one (PROCESSING,
// its lease expired or not: recovery takes those), a RETRYABLE one before its
// backoff elapsed, a BLOCKED one behind its ordering key's head, a DEAD one.
func enabled(s State) map[int64]bool {
	set := map[int64]bool{}
	for k, w := range s.Work {
		if (w.Status == "PENDING" || w.Status == "RETRYABLE") && w.Due && s.LockedBy[k] == "" {
			var n int64
			fmt.Sscan(k, &n)
			set[n] = true
		}
	}
	return set
}

// claimable checks what the claims would take in the database's present
// state against the model's enabled set: each claim path (ReceiptClaim, and
// Citus's ReceiptDueScopes with ReceiptClaimScope) claims with batches
// large enough for every receipt, in a transaction rolled back after, and
// must take exactly the receipts the model may hand out. The trace's own
// claim steps take one receipt, the model's choice: a claim that takes too
// much shows here.
func (d *driver) claimable(s State) ([]string, error) {
	want := enabled(s)
	var diffs []string
	for _, path := range []string{"ReceiptClaim", "ReceiptClaimScope"} {
		got, err := d.claimAll(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for id := range got {
			if !want[id] {
				diffs = append(diffs, fmt.Sprintf("%s took receipt %d (%s), which the model's claim may not take", path, id, workDesc(s, id)))
			}
		}
		for id := range want {
			if !got[id] {
				diffs = append(diffs, fmt.Sprintf("%s left receipt %d (%s), which the model's claim may take", path, id, workDesc(s, id)))
			}
		}
	}
	sort.Strings(diffs)
	return diffs, nil
}

// claimAll claims every receipt path can take, in a transaction it rolls
// back, and returns them as the model's receipts.
func (d *driver) claimAll(path string) (map[int64]bool, error) {
	tx, err := d.pool.Begin(d.ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(d.ctx)
	q := db.New(tx)
	tok := inboxtype.New()
	var ids []inboxtype.ID
	switch path {
	case "ReceiptClaim":
		rows, err := q.ReceiptClaim(d.ctx, db.ReceiptClaimParams{Consumers: allConsumers, MaxWalk: 10, MaxScopes: 10, MaxCount: 100, ClaimToken: tok, LeaseMs: leaseMs})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	case "ReceiptClaimScope":
		scopes, err := q.ReceiptDueScopes(d.ctx, db.ReceiptDueScopesParams{Consumers: allConsumers, MaxScopes: 10})
		if err != nil {
			return nil, err
		}
		for _, sc := range scopes {
			rows, err := q.ReceiptClaimScope(d.ctx, db.ReceiptClaimScopeParams{ScopeID: sc.ScopeID, Consumers: allConsumers, MaxCount: 100, ClaimToken: tok, LeaseMs: leaseMs})
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
		}
	}
	got := map[int64]bool{}
	for _, id := range ids {
		n := d.model(id)
		if n < 0 {
			return nil, fmt.Errorf("claimed %v, a receipt the model does not know", id)
		}
		got[n] = true
	}
	return got, tx.Rollback(d.ctx)
}

func workDesc(s State, id int64) string {
	k := key(id)
	w := s.Work[k]
	var b strings.Builder
	fmt.Fprintf(&b, "work %s", w.Status)
	if w.Status == "PROCESSING" {
		fmt.Fprintf(&b, ", lease expired %v", w.Expired)
	}
	if w.Status == "PENDING" || w.Status == "RETRYABLE" {
		fmt.Fprintf(&b, ", due %v", w.Due)
	}
	if s.LockedBy[k] != "" {
		fmt.Fprintf(&b, ", held by %s's transaction", s.LockedBy[k])
	}
	if w.Key != "" {
		fmt.Fprintf(&b, ", key %s #%d", w.Key, w.Seq)
	}
	return b.String()
}

// outOfReach names, for each receipt of s a claim may not take, why: the
// states the claim checks saw, for the test's log.
func outOfReach(s State) []string {
	var why []string
	for k, w := range s.Work {
		switch {
		case w.Status == "NONE" || w.Status == "DEAD":
		case s.LockedBy[k] != "":
			why = append(why, "held by a transaction")
		case w.Status == "PROCESSING" && w.Expired:
			why = append(why, "PROCESSING, lease expired")
		case w.Status == "PROCESSING":
			why = append(why, "PROCESSING")
		case w.Status == "BLOCKED":
			why = append(why, "BLOCKED")
		case !w.Due:
			why = append(why, w.Status+", not due")
		}
	}
	return why
}
