// Command bench runs the pginbox benchmark suite until `inbox bench` is wired
// to the same engine: go run ./internal/bench/cmd --json
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pginbox/pginbox/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
