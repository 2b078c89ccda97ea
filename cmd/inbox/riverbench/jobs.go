package main

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// jobsPhase measures one worker count the way `inbox bench --scenarios jobs`
// does: a feeder tops the available backlog up every 20 ms, completions/s
// over the duration after the warm-up, counted in the database.
func jobsPhase(ctx context.Context, dsn string, workers int, o options) (float64, error) {
	db, err := newPhaseDB(ctx, dsn, workers, o, &waitWorker{sleep: o.sleep})
	if err != nil {
		return 0, err
	}
	defer db.close()
	pool, client := db.pool, db.client
	insert := func(n int) error {
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: waitArgs{}}
		}
		_, err := client.InsertManyFast(ctx, params)
		return err
	}
	if err := insert(o.backlog); err != nil {
		return 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer client.Stop(context.WithoutCancel(ctx))

	feedCtx, stopFeeding := context.WithCancel(ctx)
	defer stopFeeding()
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-feedCtx.Done():
				return
			case <-t.C:
			}
			var available int
			if err := pool.QueryRow(feedCtx, "SELECT count(*) FROM river_job WHERE state = 'available'").Scan(&available); err != nil {
				return
			}
			if missing := o.backlog - available; missing > o.backlog/4 {
				if insert(missing) != nil {
					return
				}
			}
		}
	}()
	completed := func() (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	select { // warm up
	case <-time.After(o.warmup):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	before, err := completed()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	after, err := completed()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / time.Since(start).Seconds(), nil
}
