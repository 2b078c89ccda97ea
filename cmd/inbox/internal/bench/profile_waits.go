package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
	"time"
)

// waitEvery is how often the wait sampler reads pg_stat_activity: often
// enough for a few thousand samples a minute, cheap enough on 2 CPUs.
const waitEvery = 25 * time.Millisecond

// waitKey is what one backend was doing at one sample.
type waitKey struct {
	app, state, wait, statement string
}

// waitSamples counts backends per waitKey over a phase.
type waitSamples struct {
	ticks  int
	counts map[waitKey]int
	err    error
}

// startWaitSampler samples the bench's backends (ingest, drain) from
// pg_stat_activity until the returned function is called. "CPU" stands for
// an active backend with no wait event: running, or waiting for a CPU.
func (s *suite) startWaitSampler(ctx context.Context) (stop func() waitSamples) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan waitSamples, 1)
	go func() {
		ws := waitSamples{counts: map[waitKey]int{}}
		t := time.NewTicker(waitEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- ws
				return
			case <-t.C:
			}
			rows, err := s.admin.Query(ctx, `SELECT application_name, coalesce(state, ''),
					CASE WHEN state = 'active' AND wait_event IS NULL THEN 'CPU'
					     ELSE coalesce(wait_event_type || ':' || wait_event, '-') END,
					coalesce(substring(query from '-- name: (\w+)'), left(regexp_replace(query, '\s+', ' ', 'g'), 40))
				FROM pg_stat_activity
				WHERE application_name IN ($1, $2) AND pid <> pg_backend_pid()`, appIngest, appDrain)
			if err != nil {
				if ctx.Err() == nil && ws.err == nil {
					ws.err = err
				}
				continue
			}
			for rows.Next() {
				var k waitKey
				if rows.Scan(&k.app, &k.state, &k.wait, &k.statement) == nil {
					ws.counts[k]++
				}
			}
			if rows.Err() == nil {
				ws.ticks++
			}
		}
	}()
	return func() waitSamples {
		cancel()
		return <-done
	}
}

// writeWaits writes the samples per application: what its backends were
// doing, the most frequent first, as a share of that application's samples.
func writeWaits(path string, ws waitSamples) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "pg_stat_activity sampled every %s, %d samples", waitEvery, ws.ticks)
	if ws.err != nil {
		fmt.Fprintf(f, " (a sample failed: %v)", ws.err)
	}
	fmt.Fprintln(f, "\nstate idle = the backend waits for the client; idle in transaction = inside a transaction, waiting for the client (the handler runs); CPU = active without a wait event")
	perApp := map[string]int{}
	for k, n := range ws.counts {
		perApp[k.app] += n
	}
	keys := slices.SortedFunc(maps.Keys(ws.counts), func(a, b waitKey) int {
		return cmp.Or(cmp.Compare(a.app, b.app), cmp.Compare(ws.counts[b], ws.counts[a]))
	})
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\napplication\tbackends (mean)\tshare\tstate\twait\tstatement")
	for _, k := range keys {
		n := ws.counts[k]
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f%%\t%s\t%s\t%s\n", k.app, float64(n)/float64(max(1, ws.ticks)),
			100*float64(n)/float64(perApp[k.app]), k.state, k.wait, k.statement)
	}
	return tw.Flush()
}
