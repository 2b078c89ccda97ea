package main

import (
	"context"

	"github.com/pginbox/pginbox/inbox"
)

var statsCmd = &command{
	Name:    "stats",
	Args:    "[--completed] [--tenant ID | --global] [--json]",
	Summary: "counts per consumer and status, backlog age, DEAD count",
	Help: `
DUE counts PENDING and RETRYABLE receipts whose time has come; OLDEST DUE is the
backlog age, how long the longest-waiting of them has been due. Only active
receipts are read unless --completed also counts COMPLETED ones, which scans the
retained history.`,
}

func init() {
	statsCmd.Run = runStats
	register(statsCmd)
}

type jsonConsumerStats struct {
	Consumer            string  `json:"consumer"`
	Pending             int64   `json:"pending"`
	Processing          int64   `json:"processing"`
	Retryable           int64   `json:"retryable"`
	Dead                int64   `json:"dead"`
	Completed           *int64  `json:"completed"` // null when not counted
	Due                 int64   `json:"due"`
	OldestDueAgeSeconds float64 `json:"oldest_due_age_seconds"`
}

type jsonStats struct {
	Scope     string              `json:"scope"`
	Consumers []jsonConsumerStats `json:"consumers"`
	Dead      int64               `json:"dead"`
}

func toJSONStats(view string, st *inbox.Stats) jsonStats {
	out := jsonStats{Scope: view, Consumers: []jsonConsumerStats{}, Dead: st.Dead}
	for _, c := range st.Consumers {
		j := jsonConsumerStats{
			Consumer: c.Consumer, Pending: c.Pending, Processing: c.Processing, Retryable: c.Retryable,
			Dead: c.Dead, Due: c.Due, OldestDueAgeSeconds: c.OldestDueAge.Seconds(),
		}
		if st.CompletedCounted {
			j.Completed = &c.Completed
		}
		out.Consumers = append(out.Consumers, j)
	}
	return out
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := newFlags(statsCmd)
	var d dbFlags
	var s scopeFlags
	d.add(fs)
	s.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	completed := fs.Bool("completed", false, "also count COMPLETED receipts (scans the retained history)")
	pos, err := parseFlags(e, statsCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	st, err := view.Stats(ctx, inbox.StatsParams{IncludeCompleted: *completed})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, toJSONStats(view.String(), st))
	}
	return renderStats(e.stdout, st)
}
