package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

// Bounds of `inbox stats --watch --interval`: every refresh is a query.
const (
	defaultWatchInterval = 2 * time.Second
	minWatchInterval     = 100 * time.Millisecond
)

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

func checkWatchFlags(fs *flag.FlagSet, watch bool, interval time.Duration) error {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "interval" })
	switch {
	case set && !watch:
		return usagef("--interval needs --watch")
	case interval < minWatchInterval:
		return usagef("--interval %s: want at least %s (every refresh is a query)", interval, minWatchInterval)
	}
	return nil
}

// statsWatch is `inbox stats --watch`: it refreshes the stats every interval
// until ctx ends (Ctrl-C).
type statsWatch struct {
	e        *env
	view     *inbox.AdminView
	params   inbox.StatsParams
	interval time.Duration
	asJSON   bool
	scope    jsonScope
}

// run shows the stats until ctx ends. The first query's failure is the
// command's (wrong database, no schema); later ones are printed and the next
// refresh tries again.
func (w *statsWatch) run(ctx context.Context) error {
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for first := true; ; first = false {
		st, err := w.view.Stats(ctx, w.params)
		now := time.Now()
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C is how a watch ends
		case err != nil && first:
			return err
		case err != nil:
			fmt.Fprintf(w.e.stderr, "%s inbox stats: %s (trying again in %s)\n", fmtTime(now), strings.TrimPrefix(err.Error(), "pginbox: "), w.interval)
		default:
			if err := w.show(now, st); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (w *statsWatch) show(now time.Time, st *inbox.Stats) error {
	out := w.e.stdout
	switch {
	case w.asJSON:
		return json.NewEncoder(out).Encode(struct {
			At string `json:"at"`
			jsonStats
		}{now.UTC().Format(time.RFC3339Nano), toJSONStats(w.scope, st)})
	case w.e.tty:
		fmt.Fprintf(out, "%sinbox stats, %s, every %s, at %s; Ctrl-C to stop\n\n", clearScreen, w.view, w.interval, fmtTime(now))
		return renderStats(out, st)
	}
	stamp := fmtTime(now)
	if len(st.Consumers) == 0 {
		_, err := fmt.Fprintf(out, "%s no receipts\n", stamp)
		return err
	}
	for _, c := range st.Consumers {
		line := fmt.Sprintf("%s %s pending=%d processing=%d retryable=%d dead=%d due=%d", stamp, c.Consumer, c.Pending, c.Processing, c.Retryable, c.Dead, c.Due)
		if c.Due > 0 {
			line += " oldest_due=" + fmtAge(c.OldestDueAge)
		}
		if st.CompletedCounted {
			line += fmt.Sprintf(" completed=%d", c.Completed)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
	}
	return nil
}
