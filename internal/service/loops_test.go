package service_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/pginbox/pginbox/internal/service"
)

func TestLoopsRunUntilStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops := service.NewLoops()
		for range 3 {
			loops.Go(func(ctx context.Context) { <-ctx.Done() })
		}
		done := loops.Done()
		synctest.Wait() // the loops run and wait for their context
		select {
		case <-done:
			t.Fatal("Done closed while the loops run")
		default:
		}
		loops.Stop()
		synctest.Wait() // every goroutine has returned or is blocked
		select {
		case <-done:
		default:
			t.Fatal("loops did not return after Stop")
		}
	})
}

// A loop's context is not the caller's: it lives until Stop.
func TestLoopsOwnContext(t *testing.T) {
	loops := service.NewLoops()
	got := make(chan context.Context, 1)
	loops.Go(func(ctx context.Context) { got <- ctx })
	ctx := <-got
	if ctx.Err() != nil {
		t.Fatal("loop context done before Stop")
	}
	loops.Stop()
	<-loops.Done()
	if ctx.Err() == nil {
		t.Fatal("loop context live after Stop")
	}
}

func TestDone(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })
	done := service.Done(&wg)
	select {
	case <-done:
		t.Fatal("Done closed before the wait group was done")
	default:
	}
	close(release)
	<-done
	<-service.Done(&wg) // an idle wait group is done at once
}
