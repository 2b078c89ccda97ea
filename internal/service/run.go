package service

import (
	"context"
	"time"
)

// Startable is a service with a Start and a Stop, such as inbox.Worker.
type Startable interface {
	// Start starts the service; ctx bounds the start only.
	Start(ctx context.Context) error
	// Stop stops it, within ctx's deadline.
	Stop(ctx context.Context) error
}

// Run starts s, blocks until ctx is done, then stops s with stopWithin as
// Stop's deadline (ctx, being done, cannot bound it).
func Run(ctx context.Context, s Startable, stopWithin time.Duration) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	return s.Stop(stopCtx)
}
