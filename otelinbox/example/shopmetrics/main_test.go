package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/webhook"
)

func TestMain(m *testing.M) {
	inboxtest.SetMigrate(func(ctx context.Context, dsn string) error {
		ddl, err := os.ReadFile("../../../examples/shop/schema.sql")
		if err != nil {
			return err
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, string(ddl))
		return err
	})
	inboxtest.Main(m)
}

const tenant = "tenant-secret-9"

// A signed webhook carrying the sender's traceparent becomes one trace:
// the sender's span, the accept span, the handler's span and its completion;
// the metrics endpoint serves the accept, worker and backlog metrics in
// Prometheus format, without the tenant ID.
func TestWebhookTraceAndPrometheus(t *testing.T) {
	pool := inboxtest.Pool(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	ls, err := listen("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, app{pool: pool, tp: tp, hooks: ls, log: slog.New(slog.DiscardHandler),
			key: webhook.Key{ID: "shop-1", Secret: secret, Scope: inbox.Tenant(tenant)}})
	}()

	// The sender: its own span, its traceparent on the request.
	sctx, sender := tp.Tracer("sender").Start(context.Background(), "send order")
	body := []byte(`{"id":"evt-1","type":"order.created","version":1,"data":{"orderId":"o-1","customerId":"c-1","totalCents":1250}}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+ls.webhook.Addr().String()+"/orders", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	webhook.Sign(req.Header, "shop-1", secret, time.Now(), body)
	propagation.TraceContext{}.Inject(sctx, propagation.HeaderCarrier(req.Header))
	sender.End()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	err = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook answered %d %v (%v)", res.StatusCode, out, err)
	}
	id, err := inboxtype.Parse(out["receipt"])
	if err != nil {
		t.Fatal(err)
	}
	inboxtest.WaitForStatus(t, pool, id, inbox.StatusCompleted, 30*time.Second)

	// The trace: sender -> accept -> process, and the completion beside it.
	byName := waitForSpans(t, spans, "accept orders.projection.v1", "process orders.projection.v1", "complete orders.projection.v1")
	accept, process, complete := byName["accept orders.projection.v1"], byName["process orders.projection.v1"], byName["complete orders.projection.v1"]
	if accept.Parent.SpanID() != sender.SpanContext().SpanID() {
		t.Errorf("accept span's parent %v, want the sender's span", accept.Parent.SpanID())
	}
	if process.Parent.SpanID() != accept.SpanContext.SpanID() || complete.Parent.SpanID() != accept.SpanContext.SpanID() {
		t.Errorf("process and complete spans' parents %v, %v; want the accept span", process.Parent.SpanID(), complete.Parent.SpanID())
	}
	for _, s := range []tracetest.SpanStub{accept, process, complete} {
		if s.SpanContext.TraceID() != sender.SpanContext().TraceID() {
			t.Errorf("%s is in another trace", s.Name)
		}
	}

	// The metrics, as Prometheus scrapes them.
	metrics := scrape(t, "http://"+ls.metrics.Addr().String()+"/metrics")
	for _, want := range []string{
		`(?m)^messaging_client_sent_messages_total\{.*messaging_destination_name="orders\.projection\.v1".*pginbox_accept_outcome="accepted".*\} 1$`,
		`(?m)^pginbox_worker_events_total\{.*pginbox_worker_event="completed".*\} 1$`,
		`(?m)^messaging_process_duration_seconds_count\{.*messaging_destination_name="orders\.projection\.v1".*\} 1$`,
		`(?m)^pginbox_backlog_due\{.*messaging_destination_name="orders\.projection\.v1".*\} 0$`,
		`(?m)^pginbox_backlog_receipts\{.*pginbox_receipt_status="DEAD".*\} 0$`,
		`(?m)^pginbox_backlog_oldest_due_age_seconds\{`,
	} {
		if !regexp.MustCompile(want).MatchString(metrics) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, tenant) {
		t.Error("the tenant ID is in /metrics")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}

	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve after shutdown: %v", err)
	}
}

// waitForSpans waits until every named span has ended (settle spans end on
// the event observer's goroutine, after the receipt completed).
func waitForSpans(t *testing.T, exp *tracetest.InMemoryExporter, names ...string) map[string]tracetest.SpanStub {
	t.Helper()
	var got map[string]tracetest.SpanStub
	testkit.Eventually(t, 30*time.Second, func() bool {
		got = map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			got[s.Name] = s
		}
		for _, n := range names {
			if _, ok := got[n]; !ok {
				return false
			}
		}
		return true
	}, "spans %v to end; have %v", names, testkit.Lazy(func() string { return fmt.Sprint(got) }))
	return got
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", res.StatusCode, err)
	}
	return string(b)
}

// The program says what is missing before it starts anything.
func TestRunRefusesIncompleteSetup(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "DATABASE_URL is not set"},
		{map[string]string{"DATABASE_URL": "postgres://x"}, nil, "WEBHOOK_SECRET is not set"},
		{map[string]string{"DATABASE_URL": "postgres://x", "WEBHOOK_SECRET": "s"}, []string{"-tenant", "acme"}, "-key-id and -tenant are required"},
		{nil, []string{"-bogus"}, "flag provided but not defined: -bogus"},
	} {
		err := run(tc.args, func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want %q", tc.env, tc.args, err, tc.want)
		}
	}
}
