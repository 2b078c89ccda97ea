// Command otelbench is `inbox bench` with the OpenTelemetry integration
// (otelinbox) measured as a third side: the accept and drain scenarios run
// pginbox plain, with otelinbox's middleware and event observer installed on
// a real SDK (spans through a batch processor to an exporter that drops
// them, metrics aggregated in memory), and the raw SQL ceiling, alternating
// in the same run. The report's "hooked" figures and hooked_ratio compare
// the instrumented side with plain pginbox; the goal is >= 0.95.
//
// It is a module of its own because it imports the OpenTelemetry SDK, which
// pginbox's own module must not; it lives under cmd/inbox so it may use the
// bench's scenario code (cmd/inbox/internal/bench). It takes `inbox bench`'s
// flags; without -scenarios it runs accept-fresh, accept-dup90 and drain.
//
//	cd cmd/inbox/otelbench && go run . -calls 2000 -rounds 3
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pginbox/pginbox/cmd/inbox/internal/bench"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
)

// defaultScenarios are the ones with a hooked side worth the machine time.
const defaultScenarios = "accept-fresh,accept-dup90,drain"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(dropExporter{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	tel, err := otelinbox.New(otelinbox.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		io.WriteString(stderr, "otelbench: "+err.Error()+"\n")
		return 1
	}
	if !hasFlag(args, "scenarios") {
		args = append([]string{"-scenarios", defaultScenarios}, args...)
	}
	return bench.CommandWithHooks(ctx, args, stdout, stderr, Hooks(tel))
}

// Hooks installs tel the way an application would.
func Hooks(tel *otelinbox.Telemetry) *bench.Hooks {
	return &bench.Hooks{
		Name: "otelinbox",
		Client: func(c *inbox.Config) {
			c.AcceptMiddleware = append(c.AcceptMiddleware, tel.AcceptMiddleware())
			c.AcceptBatchMiddleware = append(c.AcceptBatchMiddleware, tel.AcceptBatchMiddleware())
		},
		Worker: func(c *inbox.WorkerConfig) {
			c.HandlerMiddleware = append(c.HandlerMiddleware, tel.HandlerMiddleware())
		},
		Observe: func(w *inbox.Worker) func() {
			obs, err := tel.ObserveWorker(w)
			if err != nil {
				panic(err) // w is never nil here
			}
			return obs.Close
		},
	}
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// dropExporter receives every span and keeps none: the SDK does its full
// work, the export costs nothing.
type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }
