package outbox

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
)

// StatsParams configures Stats.
type StatsParams struct {
	// IncludePublished also counts PUBLISHED events. That reads the retained
	// history; the other counts read only unpublished events. Defaults to
	// false.
	IncludePublished bool
}

// Stats summarizes the outbox.
type Stats struct {
	// Destinations has one entry per destination with events, by name.
	Destinations []DestinationStats
	// Dead is the number of DEAD events over all destinations.
	Dead int64
	// PublishedCounted says whether the Published counts were filled in.
	PublishedCounted bool
}

// DestinationStats are one destination's counts.
type DestinationStats struct {
	Destination string // the destination counted
	// Pending counts events waiting to be published, Retrying among them
	// those that failed before and wait for another attempt.
	Pending    int64
	Retrying   int64
	Publishing int64 // events a relay is publishing now
	Dead       int64 // events that failed for good: waiting for an operator
	// Published is counted only with StatsParams.IncludePublished.
	Published int64
	// Due counts PENDING events whose time has come.
	Due int64
	// OldestDueAge is how long the longest-waiting due event has been due.
	// Zero when nothing is due.
	OldestDueAge time.Duration
}

// Stats returns counts per destination and status and the backlog age, as one
// consistent snapshot.
func (a *Admin) Stats(ctx context.Context, p StatsParams) (*Stats, error) {
	out := &Stats{PublishedCounted: p.IncludePublished}
	byName := map[string]*DestinationStats{}
	get := func(name string) *DestinationStats {
		ds, ok := byName[name]
		if !ok {
			ds = &DestinationStats{Destination: name}
			byName[name] = ds
		}
		return ds
	}
	err := pgx.BeginTxFunc(ctx, a.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := db.New(tx)
		rows, err := q.OutboxStats(ctx)
		if err != nil {
			return dbError("outbox stats", err)
		}
		for _, r := range rows {
			ds := get(r.Destination)
			switch Status(r.Status) {
			case StatusPending:
				ds.Pending, ds.Retrying = r.Total, r.Retrying
			case StatusPublishing:
				ds.Publishing = r.Total
			case StatusDead:
				ds.Dead = r.Total
				out.Dead += r.Total
			}
			ds.Due += r.Due
			ds.OldestDueAge = max(ds.OldestDueAge, time.Duration(r.OldestDueMs)*time.Millisecond)
		}
		if !p.IncludePublished {
			return nil
		}
		done, err := q.OutboxStatsPublished(ctx)
		if err != nil {
			return dbError("outbox stats: published", err)
		}
		for _, r := range done {
			get(r.Destination).Published = r.Total
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Destinations = make([]DestinationStats, 0, len(byName))
	for _, ds := range byName {
		out.Destinations = append(out.Destinations, *ds)
	}
	slices.SortFunc(out.Destinations, func(a, b DestinationStats) int { return cmp.Compare(a.Destination, b.Destination) })
	return out, nil
}
