package otelinbox_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/otelinbox"
)

// InjectMetadata writes traceparent into a copy of the metadata, and nothing
// without a span.
func TestInjectMetadata(t *testing.T) {
	t.Parallel()
	r := newRig(t, otelinbox.Config{})
	shared := map[string]string{"correlation-id": "c-1"}

	msg := order("a", 1)
	msg.Metadata = shared
	otelinbox.InjectMetadata(context.Background(), &msg)
	if len(msg.Metadata) != 1 {
		t.Errorf("without a span: metadata %v, want it unchanged", msg.Metadata)
	}

	ctx, span := r.tp.Tracer("test").Start(context.Background(), "produce")
	defer span.End()
	otelinbox.InjectMetadata(ctx, &msg)
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := msg.Metadata["traceparent"]; got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if msg.Metadata["correlation-id"] != "c-1" {
		t.Errorf("other metadata lost: %v", msg.Metadata)
	}
	if len(shared) != 1 {
		t.Errorf("the caller's map was changed: %v", shared)
	}
	if !trace.SpanContextFromContext(ctx).Equal(sc) {
		t.Fatal("context lost its span")
	}
}
