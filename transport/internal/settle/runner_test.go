package settle

import (
	"context"
	"testing"
	"testing/synctest"
)

func TestRunnerCloseEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Runner
		returned, finish := make(chan struct{}), make(chan struct{})
		go func() {
			ctx, end := r.Begin(context.Background())
			defer end()
			<-ctx.Done()
			<-finish // still returning: Close must wait for this
			close(returned)
		}()
		synctest.Wait() // Run has begun and waits for its context
		closed := make(chan error, 1)
		go func() { closed <- r.Close() }()
		synctest.Wait() // Close cancelled Run and waits, or returned
		select {
		case <-closed:
			t.Fatal("Close returned before Run did")
		default:
		}
		close(finish)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		select {
		case <-returned:
		default:
			t.Fatal("Close returned before Run did")
		}
		ctx, end := r.Begin(context.Background())
		defer end()
		if ctx.Err() == nil {
			t.Fatal("a Run after Close got a live context")
		}
	})
}
