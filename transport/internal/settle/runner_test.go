package settle

import (
	"context"
	"testing"
	"time"
)

func TestRunnerCloseEndsRun(t *testing.T) {
	var r Runner
	returned := make(chan struct{})
	started := make(chan struct{})
	go func() {
		ctx, end := r.Begin(context.Background())
		defer end()
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // Close must wait for this
		close(returned)
	}()
	<-started
	if err := r.Close(); err != nil {
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
}
