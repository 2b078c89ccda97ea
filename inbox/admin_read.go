package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
)

// Get returns the receipt with its payload, metadata, replays and audit trail.
// A receipt outside the view's scope is ErrNotFound.
func (v *AdminView) Get(ctx context.Context, id ID) (*ReceiptDetails, error) {
	if v.err != nil {
		return nil, v.err
	}
	all, kind, sid := v.scopeArgs()
	var out *ReceiptDetails
	err := v.readOnly(ctx, func(q *db.Queries) error {
		row, err := q.ReceiptGet(ctx, db.ReceiptGetParams{ID: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if errors.Is(err, pgx.ErrNoRows) {
			return v.notFound(id)
		}
		if err != nil {
			return dbError("get receipt", err)
		}
		r, err := receiptFromRow(row)
		if err != nil {
			return err
		}
		replays, err := q.ReceiptListReplays(ctx, db.ReceiptListReplaysParams{ReplayOf: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if err != nil {
			return dbError("get receipt: replays", err)
		}
		audit, err := q.AuditListByReceipt(ctx, db.AuditListByReceiptParams{
			ReceiptID: id, ReplayOf: row.ReplayOf, AllScopes: all, ScopeKind: kind, ScopeID: sid,
		})
		if err != nil {
			return dbError("get receipt: audit trail", err)
		}
		out = &ReceiptDetails{Receipt: r, Replays: make([]ReplaySummary, 0, len(replays)), Audit: make([]AuditEntry, 0, len(audit))}
		if r.OrderingKey != "" && r.Status != StatusCompleted {
			// Reads only this key's entries of pginbox_work_ordering: the
			// cost grows with the key's backlog, not the table's.
			out.KeyBlocked, err = q.ReceiptKeyBlockedBehind(ctx, db.ReceiptKeyBlockedBehindParams{
				ScopeID: row.ScopeID, Consumer: row.Consumer, ScopeKind: row.ScopeKind, OrderingKey: r.OrderingKey, OrderingSeq: r.OrderingSeq,
			})
			if err != nil {
				return dbError("get receipt: receipts behind it", err)
			}
		}
		for _, rp := range replays {
			out.Replays = append(out.Replays, ReplaySummary{ID: rp.ID, Status: Status(rp.Status), Version: rp.Version, CreatedAt: rp.CreatedAt, CompletedAt: rp.CompletedAt})
		}
		for _, a := range audit {
			out.Audit = append(out.Audit, auditFromRow(a))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListParams filters and pages List. Zero fields do not filter. A Consumer or
// Source that no identity can have (invalid UTF-8, a control character, over
// MaxIdentityBytes) is a *ValidationError naming the field.
type ListParams struct {
	// Statuses keeps receipts in any of these statuses.
	Statuses []Status
	Consumer string // keeps one consumer's receipts
	Source   string // keeps one producer's receipts
	// CreatedAfter keeps receipts created at or after it.
	CreatedAfter time.Time
	// CreatedBefore keeps receipts created before it.
	CreatedBefore time.Time
	// Limit is the page size. Defaults to DefaultListLimit; at most MaxListLimit.
	Limit int
	// After is the cursor: pass the previous page's ListResult.Next.
	After ID
}

// ListResult is one page of List.
type ListResult struct {
	// Receipts are in ID order, which is creation order (IDs are ULIDs).
	// Payload and Metadata are not loaded.
	Receipts []Receipt
	// Next is the cursor for the following page (ListParams.After); zero when
	// this is the last page.
	Next ID
}

var knownStatuses = []Status{StatusPending, StatusProcessing, StatusRetryable, StatusCompleted, StatusDead}

// List returns one page of the view's receipts matching p, in a stable order
// (by ID) with keyset pagination: pages do not shift while receipts are added.
func (v *AdminView) List(ctx context.Context, p ListParams) (*ListResult, error) {
	if v.err != nil {
		return nil, v.err
	}
	limit := p.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return nil, &ValidationError{Field: "limit", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", limit, MaxListLimit)}
	}
	// PostgreSQL cannot compare invalid text: a filter no identity can match
	// is the caller's mistake, not a failed database call.
	for _, f := range []struct{ field, value string }{{"consumer", p.Consumer}, {"source", p.Source}} {
		if f.value != "" {
			if err := validateString(f.field, f.value); err != nil {
				return nil, err
			}
		}
	}
	statuses := make([]string, 0, len(p.Statuses))
	for _, s := range p.Statuses {
		if !slices.Contains(knownStatuses, s) {
			return nil, &ValidationError{Field: "status", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%q: must be one of %s", s, joinStatuses(knownStatuses))}
		}
		statuses = append(statuses, string(s))
	}
	q, err := v.queries(ctx)
	if err != nil {
		return nil, err
	}
	all, kind, sid := v.scopeArgs()
	rows, err := q.ReceiptList(ctx, db.ReceiptListParams{
		AllScopes:     all,
		ScopeKind:     kind,
		ScopeID:       sid,
		After:         p.After,
		Statuses:      statuses,
		Consumer:      p.Consumer,
		Source:        p.Source,
		CreatedAfter:  timePtr(p.CreatedAfter),
		CreatedBefore: timePtr(p.CreatedBefore),
		MaxCount:      int32(limit + 1), // one more tells whether a next page exists
	})
	if err != nil {
		return nil, dbError("list receipts", err)
	}
	out := &ListResult{Receipts: make([]Receipt, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			out.Next = out.Receipts[limit-1].ID
			break
		}
		r, err := receiptFromRow(db.PginboxReceiptsLive(row)) // same columns, payload left out
		if err != nil {
			return nil, err
		}
		out.Receipts = append(out.Receipts, r)
	}
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// StatsParams configures Stats.
type StatsParams struct {
	// IncludeCompleted also counts COMPLETED receipts. That reads the whole
	// retained history, so its cost grows with retention; the other counts read
	// only the active receipts. Defaults to false.
	IncludeCompleted bool
}

// Stats summarizes the view's receipts.
type Stats struct {
	// Consumers has one entry per consumer with receipts, sorted by name.
	Consumers []ConsumerStats
	// Dead is the number of DEAD receipts over all consumers.
	Dead int64
	// Blocked is the number of receipts waiting behind an earlier receipt of
	// their ordering key, over all consumers.
	Blocked int64
	// CompletedCounted says whether the Completed counts were filled in
	// (StatsParams.IncludeCompleted).
	CompletedCounted bool
}

// ConsumerStats are one consumer's counts.
type ConsumerStats struct {
	Consumer   string // the consumer counted
	Pending    int64  // receipts PENDING: waiting for a worker
	Processing int64  // receipts PROCESSING: a worker holds them
	Retryable  int64  // receipts RETRYABLE: waiting for their backoff
	Dead       int64  // receipts DEAD: waiting for an operator
	// Blocked counts the PENDING receipts (included in Pending) that wait
	// behind an earlier receipt of their ordering key.
	Blocked int64
	// Completed is counted only with StatsParams.IncludeCompleted.
	Completed int64
	// Due counts PENDING and RETRYABLE receipts whose time has come.
	Due int64
	// OldestDueAge is the backlog age: how long the longest-waiting due receipt
	// has been due (now - its available_at). Zero when nothing is due.
	OldestDueAge time.Duration
}

// Stats returns counts per consumer and status, the backlog age per consumer
// and the number of DEAD receipts, as one consistent snapshot.
func (v *AdminView) Stats(ctx context.Context, p StatsParams) (*Stats, error) {
	if v.err != nil {
		return nil, v.err
	}
	all, kind, sid := v.scopeArgs()
	out := &Stats{CompletedCounted: p.IncludeCompleted}
	byName := map[string]*ConsumerStats{}
	get := func(name string) *ConsumerStats {
		cs, ok := byName[name]
		if !ok {
			cs = &ConsumerStats{Consumer: name}
			byName[name] = cs
		}
		return cs
	}
	err := v.readOnly(ctx, func(q *db.Queries) error {
		rows, err := q.ReceiptStats(ctx, db.ReceiptStatsParams{AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if err != nil {
			return dbError("stats", err)
		}
		for _, r := range rows {
			cs := get(r.Consumer)
			switch Status(r.Status) {
			case StatusPending:
				cs.Pending += r.Total
			case statusBlocked:
				cs.Pending += r.Total
				cs.Blocked = r.Total
				out.Blocked += r.Total
			case StatusProcessing:
				cs.Processing = r.Total
			case StatusRetryable:
				cs.Retryable = r.Total
			case StatusDead:
				cs.Dead = r.Total
				out.Dead += r.Total
			}
			cs.Due += r.Due
			cs.OldestDueAge = max(cs.OldestDueAge, time.Duration(r.OldestDueMs)*time.Millisecond)
		}
		if !p.IncludeCompleted {
			return nil
		}
		done, err := q.ReceiptStatsCompleted(ctx, db.ReceiptStatsCompletedParams{AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if err != nil {
			return dbError("stats: completed", err)
		}
		for _, r := range done {
			get(r.Consumer).Completed = r.Total
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Consumers = make([]ConsumerStats, 0, len(byName))
	for _, cs := range byName {
		out.Consumers = append(out.Consumers, *cs)
	}
	slices.SortFunc(out.Consumers, func(a, b ConsumerStats) int {
		switch {
		case a.Consumer < b.Consumer:
			return -1
		case a.Consumer > b.Consumer:
			return 1
		}
		return 0
	})
	return out, nil
}
