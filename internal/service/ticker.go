package service

import (
	"context"
	"time"
)

// Job is a periodic job of a service.
type Job struct {
	// What names it in the error logged when it fails: "lease recovery".
	What string
	Run  func(ctx context.Context) error // one run; an error is logged, and the job runs again at the next tick
}

// Ticker runs a service's periodic jobs, such as lease recovery.
type Ticker struct {
	Base
	Interval time.Duration // between runs of the jobs
	Jobs     []Job         // run in order
}

// Run runs the jobs in order at once, then every Interval until ctx is done.
// A job that fails is logged and the next one runs; a failure after ctx is
// done is the shutdown's and is not logged.
func (t *Ticker) Run(ctx context.Context) {
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	for {
		for _, j := range t.Jobs {
			if err := j.Run(ctx); err != nil && ctx.Err() == nil {
				t.Log.Error(t.prefix(j.What+" failed"), "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
