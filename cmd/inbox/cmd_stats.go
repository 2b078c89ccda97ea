package main

import (
	"context"

	"github.com/pginbox/pginbox/inbox"
)

var statsCmd = &command{
	Name:    "stats",
	Args:    "[--completed] [--tenant ID | --global] [--json] [--watch [--interval 2s]]",
	Summary: "counts per consumer and status, backlog age, DEAD count",
	Help: `
DUE counts PENDING and RETRYABLE receipts whose time has come; OLDEST DUE is the
backlog age, how long the longest-waiting of them has been due. Only active
receipts are read unless --completed also counts COMPLETED ones, which scans the
retained history.

--watch refreshes the numbers every --interval (default 2s, at least 100ms)
until Ctrl-C, which ends it with exit code 0. On a terminal it redraws the
table in place, cutting long consumer names so that the counts stay on their
row; otherwise (a pipe, a log) it prints one plain line per consumer per
refresh, stamped with the time, or with --json one JSON object per refresh
(the shape below plus "at"). A failed refresh prints the error and tries
again at the next one.

With --json:
  {
    "scope": {"kind": "all"},            or {"kind": "global"}, or
                                         {"kind": "tenant", "id": "acme"}
    "dead": 2,                           DEAD receipts over all consumers
    "consumers": [                       one per consumer, by name
      {
        "consumer": "orders.projection.v1",
        "pending": 1, "processing": 0, "retryable": 0, "dead": 2,
        "completed": 40,                 null without --completed
        "due": 1,
        "oldest_due_age_seconds": 12.5   null when nothing is due
      }
    ]
  }`,
}

func init() {
	statsCmd.Run = runStats
	register(statsCmd)
}

type jsonConsumerStats struct {
	Consumer            string   `json:"consumer"`
	Pending             int64    `json:"pending"`
	Processing          int64    `json:"processing"`
	Retryable           int64    `json:"retryable"`
	Dead                int64    `json:"dead"`
	Blocked             int64    `json:"blocked,omitempty"` // PENDING behind an earlier receipt of their ordering key
	Completed           *int64   `json:"completed"`         // null when not counted
	Due                 int64    `json:"due"`
	OldestDueAgeSeconds *float64 `json:"oldest_due_age_seconds"` // null when nothing is due
}

type jsonStats struct {
	Scope     jsonScope           `json:"scope"`
	Dead      int64               `json:"dead"`
	Blocked   int64               `json:"blocked,omitempty"`
	Consumers []jsonConsumerStats `json:"consumers"`
}

func toJSONStats(scope jsonScope, st *inbox.Stats) jsonStats {
	out := jsonStats{Scope: scope, Consumers: []jsonConsumerStats{}, Dead: st.Dead, Blocked: st.Blocked}
	for _, c := range st.Consumers {
		j := jsonConsumerStats{
			Consumer: c.Consumer, Pending: c.Pending, Processing: c.Processing, Retryable: c.Retryable,
			Dead: c.Dead, Blocked: c.Blocked, Due: c.Due,
		}
		if st.CompletedCounted {
			j.Completed = &c.Completed
		}
		if c.Due > 0 {
			age := c.OldestDueAge.Seconds()
			j.OldestDueAgeSeconds = &age
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
	watch := fs.Bool("watch", false, "refresh every --interval until Ctrl-C")
	interval := fs.Duration("interval", defaultWatchInterval, "time between two refreshes of --watch")
	pos, err := parseFlags(e, statsCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if err := checkWatchFlags(fs, *watch, *interval); err != nil {
		return err
	}
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	if *watch {
		w := &statsWatch{e: e, view: view, params: inbox.StatsParams{IncludeCompleted: *completed}, interval: *interval, asJSON: *asJSON, scope: s.json()}
		return w.run(ctx)
	}
	st, err := view.Stats(ctx, inbox.StatsParams{IncludeCompleted: *completed})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, toJSONStats(s.json(), st))
	}
	return renderStats(e.stdout, st, 0)
}
