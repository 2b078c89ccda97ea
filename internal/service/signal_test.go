package service_test

import (
	"testing"

	"github.com/pginbox/pginbox/internal/service"
)

// Signal never blocks, and signals sent before the receiver looks fold into
// one.
func TestSignal(t *testing.T) {
	ch := make(chan struct{}, 1)
	service.Signal(ch)
	service.Signal(ch)
	service.Signal(ch)
	if len(ch) != 1 {
		t.Fatalf("pending signals: %d, want 1", len(ch))
	}
	<-ch
	if len(ch) != 0 {
		t.Fatal("a second signal was pending")
	}
	service.Signal(make(chan struct{})) // nobody receiving: must not block
}
