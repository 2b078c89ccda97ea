package otelinbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/otelinbox"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

const (
	consumer  = "orders.projection.v1"
	eventType = "order.created"
	// Strings that must never reach telemetry unless configured.
	secretTenant  = "tenant-secret-42"
	secretPayload = "payload-secret-7"
)

// rig is a database, an in-memory span exporter, a manual metric reader and a
// Telemetry writing to them.
type rig struct {
	pool   *pgxpool.Pool
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	tel    *otelinbox.Telemetry
}

func newRig(t *testing.T, cfg otelinbox.Config) *rig {
	t.Helper()
	r := &rig{pool: inboxtest.Pool(t), spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.mp = mp
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	cfg.TracerProvider, cfg.MeterProvider = r.tp, mp
	tel, err := otelinbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	return r
}

func (r *rig) client(t *testing.T) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(r.pool, inbox.Config{
		Consumers:             []string{consumer},
		AcceptMiddleware:      []inbox.AcceptMiddleware{r.tel.AcceptMiddleware()},
		AcceptBatchMiddleware: []inbox.AcceptBatchMiddleware{r.tel.AcceptBatchMiddleware()},
		Logger:                quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// worker runs fn for every order.created v1 with the handler middleware and
// retries at once.
func (r *rig) worker(t *testing.T, fn handler.Func, mw ...handler.Middleware) *inbox.Worker {
	t.Helper()
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: consumer, EventType: eventType, SchemaVersion: 1}, fn); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(r.pool, reg, inbox.WorkerConfig{
		HandlerMiddleware: mw,
		Backoff:           func(int) time.Duration { return 0 },
		Logger:            quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func order(id string, n int) inbox.Message {
	return inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant(secretTenant), Source: "checkout", Consumer: consumer, MessageID: id},
		EventType:     eventType,
		SchemaVersion: 1,
		Payload:       map[string]any{"orderId": id, "note": secretPayload, "n": n},
	}
}

func (r *rig) metrics(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// point is one data point, flattened for comparisons.
type point struct {
	attrs attribute.Set
	value float64 // sum, gauge value, or histogram count
	sum   float64 // histogram sum
}

// points returns the data points of the metric called name (every metric
// for "").
func points(t *testing.T, rm metricdata.ResourceMetrics, name string) []point {
	t.Helper()
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if name != "" && m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: float64(p.Count), sum: p.Sum})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: float64(p.Count), sum: float64(p.Sum)})
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

// total adds the values of the points whose attributes include every one of
// want.
func total(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (value, sum float64) {
	t.Helper()
	for _, p := range points(t, rm, name) {
		if hasAll(p.attrs, want) {
			value += p.value
			sum += p.sum
		}
	}
	return value, sum
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// spansNamed returns the ended spans with name.
func (r *rig) spansNamed(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range r.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// leaks lists every place a secret appears in the spans or metrics.
func (r *rig) leaks(t *testing.T, secrets ...string) []string {
	t.Helper()
	var out []string
	check := func(where, s string) {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				out = append(out, fmt.Sprintf("%s: %q", where, s))
			}
		}
	}
	for _, s := range r.spans.GetSpans() {
		check("span name", s.Name)
		check(s.Name+" status", s.Status.Description)
		for _, kv := range s.Attributes {
			check(s.Name+" attribute "+string(kv.Key), kv.Value.String())
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				check(s.Name+" event "+e.Name+" "+string(kv.Key), kv.Value.String())
			}
		}
	}
	for _, p := range points(t, r.metrics(t), "") {
		for _, kv := range p.attrs.ToSlice() {
			check("metric attribute "+string(kv.Key), kv.Value.String())
		}
	}
	return out
}

// metadata returns the stored metadata of receipt id.
func (r *rig) metadata(t *testing.T, id inbox.ID) map[string]string {
	t.Helper()
	admin, err := inbox.NewAdmin(r.pool, inbox.AdminConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	d, err := admin.Operator().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Metadata
}
