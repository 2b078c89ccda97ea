package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/db"
)

// Limits of DeadGroups.
const (
	DefaultDeadGroupsLimit = 100
	MaxDeadGroupsLimit     = 1000
	// DeadGroupSamples is how many receipt IDs each DeadGroup carries.
	DeadGroupSamples = 5
)

// DeadGroupsParams filters and bounds DeadGroups.
type DeadGroupsParams struct {
	// Consumer keeps one consumer's DEAD receipts. Defaults to every consumer.
	Consumer string
	// Limit is the most groups returned, largest first. Defaults to
	// DefaultDeadGroupsLimit; at most MaxDeadGroupsLimit.
	Limit int
}

// DeadGroup is the DEAD receipts of one consumer that failed with the same
// last error.
type DeadGroup struct {
	Consumer string
	// LastError is the error text the receipts died with; empty when none was
	// recorded.
	LastError string
	Count     int64
	// FirstDeadAt and LastDeadAt bound when the group's receipts went DEAD
	// (their last update).
	FirstDeadAt time.Time
	LastDeadAt  time.Time
	// SampleIDs are the newest receipts of the group, at most DeadGroupSamples.
	SampleIDs []ID
}

// DeadGroupsResult is the answer of DeadGroups.
type DeadGroupsResult struct {
	// Groups are ordered by Count, largest first.
	Groups []DeadGroup
	// Truncated says that more groups exist than Limit allowed.
	Truncated bool
}

// DeadGroups returns the view's DEAD receipts grouped by consumer and last
// error, so an operator sees at a glance which failures to fix first.
func (v *AdminView) DeadGroups(ctx context.Context, p DeadGroupsParams) (*DeadGroupsResult, error) {
	if v.err != nil {
		return nil, v.err
	}
	limit := p.Limit
	switch {
	case limit == 0:
		limit = DefaultDeadGroupsLimit
	case limit < 0 || limit > MaxDeadGroupsLimit:
		return nil, &ValidationError{Field: "limit", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", limit, MaxDeadGroupsLimit)}
	}
	q, err := v.queries(ctx)
	if err != nil {
		return nil, err
	}
	all, kind, sid := v.scopeArgs()
	rows, err := q.ReceiptDeadGroups(ctx, db.ReceiptDeadGroupsParams{
		Samples:   DeadGroupSamples,
		AllScopes: all,
		ScopeKind: kind,
		ScopeID:   sid,
		Consumer:  p.Consumer,
		MaxCount:  int32(limit + 1), // one more tells whether groups were left out
	})
	if err != nil {
		return nil, dbError("dead groups", err)
	}
	out := &DeadGroupsResult{Groups: make([]DeadGroup, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			out.Truncated = true
			break
		}
		out.Groups = append(out.Groups, DeadGroup{
			Consumer:    r.Consumer,
			LastError:   r.LastError,
			Count:       r.Total,
			FirstDeadAt: r.FirstDeadAt,
			LastDeadAt:  r.LastDeadAt,
			SampleIDs:   r.SampleIds,
		})
	}
	return out, nil
}
