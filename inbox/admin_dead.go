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
	// DeadGroupSamples is how many receipts each DeadGroup carries in Samples.
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

// DeadGroup is the DEAD receipts of one consumer whose last errors have the
// same shape: the same text once the IDs and numbers in it are set aside, so
// "order 1234 not found" and "order 5678 not found" are one failure to fix.
type DeadGroup struct {
	Consumer string // the receipts' consumer
	// ErrorShape is the last error with UUIDs replaced by <uuid>, ULIDs by
	// <ulid>, hex strings of 16 or more characters (hashes, trace IDs) by <hex>
	// and runs of digits by <n>; empty when no error text was recorded.
	ErrorShape string
	// LastError is the exact last error of the group's newest receipt.
	LastError string
	Count     int64 // DEAD receipts in the group
	// Texts is how many distinct exact error texts the group holds: 1 when
	// every receipt died with the same text.
	Texts int64
	// FirstDeadAt and LastDeadAt bound when the group's receipts went DEAD
	// (their last update).
	FirstDeadAt time.Time
	LastDeadAt  time.Time
	// Samples are the newest receipts of the group with their exact last
	// errors, newest first, at most DeadGroupSamples.
	Samples []DeadSample
}

// DeadSample is one receipt of a DeadGroup with its exact last error.
type DeadSample struct {
	ID        ID     // the receipt
	LastError string // its last error, exactly
}

// DeadGroupsResult is the answer of DeadGroups.
type DeadGroupsResult struct {
	// Groups are ordered by Count, largest first.
	Groups []DeadGroup
	// Truncated says that more groups exist than Limit allowed.
	Truncated bool
}

// DeadGroups returns the view's DEAD receipts grouped by consumer and error
// shape, largest group first, so an operator sees at a glance which failures
// to fix first. A Consumer filter that no consumer name can match (invalid
// UTF-8, a control character, over MaxIdentityBytes) is a *ValidationError
// for the field "consumer".
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
	if p.Consumer != "" {
		// PostgreSQL cannot compare invalid text: say what is wrong with it
		// instead of failing like an unreachable database.
		if err := validateString("consumer", p.Consumer); err != nil {
			return nil, err
		}
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
		g := DeadGroup{
			Consumer:    r.Consumer,
			ErrorShape:  r.ErrorShape,
			Count:       r.Total,
			Texts:       r.Texts,
			FirstDeadAt: r.FirstDeadAt,
			LastDeadAt:  r.LastDeadAt,
			Samples:     make([]DeadSample, 0, len(r.SampleIds)),
		}
		for j, id := range r.SampleIds {
			g.Samples = append(g.Samples, DeadSample{ID: id, LastError: r.SampleErrors[j]})
		}
		if len(g.Samples) > 0 {
			g.LastError = g.Samples[0].LastError
		}
		out.Groups = append(out.Groups, g)
	}
	return out, nil
}
