package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/visible"
)

// Bounds of `inbox stats --watch --interval`: every refresh is a query.
const (
	defaultWatchInterval = 2 * time.Second
	minWatchInterval     = 100 * time.Millisecond
)

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
	screen   *screen // on a terminal
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
			fmt.Fprintf(w.e.stderr, "%s inbox stats: %s (trying again in %s)\n", fmtTime(now), visible.String(strings.TrimPrefix(err.Error(), "pginbox: ")), w.interval)
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
		return w.redraw(now, st)
	}
	stamp := fmtTime(now)
	if len(st.Consumers) == 0 {
		_, err := fmt.Fprintf(out, "%s no receipts\n", stamp)
		return err
	}
	for _, c := range st.Consumers {
		line := fmt.Sprintf("%s %s pending=%d processing=%d retryable=%d dead=%d due=%d", stamp, visible.String(c.Consumer), c.Pending, c.Processing, c.Retryable, c.Dead, c.Due)
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

// redraw shows the stats on a terminal in place of the last refresh. When a
// row is wider than the terminal, long consumer names are cut so that the
// counts stay on one line with them; what still wraps is redrawn all the
// same.
func (w *statsWatch) redraw(now time.Time, st *inbox.Stats) error {
	if w.screen == nil {
		size := w.e.size
		if size == nil {
			size = func() (int, int, bool) { return 0, 0, false }
		}
		w.screen = &screen{w: w.e.stdout, size: size}
	}
	frame := func(nameWidth int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "inbox stats, %s, every %s, at %s; Ctrl-C to stop\n\n", visible.String(w.view.String()), w.interval, fmtTime(now))
		renderStats(&b, st, nameWidth)
		return b.String()
	}
	text := frame(0)
	if cols, _, ok := w.screen.size(); ok {
		widest, longest := 0, 0
		for _, l := range strings.Split(text, "\n")[2:] { // the table, below the title
			widest = max(widest, textWidth(l))
		}
		for _, c := range st.Consumers {
			longest = max(longest, textWidth(visible.String(c.Consumer)))
		}
		if widest > cols && longest > minNameWidth {
			text = frame(max(minNameWidth, longest-(widest-cols)))
		}
	}
	return w.screen.draw(text)
}

// minNameWidth is the shortest a --watch cuts a consumer name to.
const minNameWidth = 16
