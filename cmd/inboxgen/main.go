// Command inboxgen generates typed accept functions, per-consumer handler
// interfaces and their registration functions from //inbox:event
// declarations, and typed emit functions from //outbox:event declarations
// (see package gen for the format). Run it with go generate:
//
//	//go:generate go run github.com/pginbox/pginbox/cmd/inboxgen -queries github.com/acme/shop/shopdb
//
// Flags:
//
//	-dir      package directory (default ".", the package go generate runs in)
//	-queries  import path of the application's sqlc package; handler methods
//	          then receive its *Queries bound to the message's transaction
//	-out      generated file name inside -dir (default inbox_gen.go)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pginbox/pginbox/gen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("inboxgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := gen.Config{}
	fs.StringVar(&cfg.Dir, "dir", ".", "package directory")
	fs.StringVar(&cfg.Queries, "queries", "", "import path of the sqlc package (optional)")
	fs.StringVar(&cfg.Output, "out", gen.DefaultOutput, "generated file name inside -dir")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: inboxgen [-dir dir] [-queries importpath] [-out file]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if filepath.Base(cfg.Output) != cfg.Output {
		fmt.Fprintf(stderr, "inboxgen: -out %q must be a file name, not a path: use -dir for the directory\n", cfg.Output)
		return 2
	}
	// go generate says which line invoked us; errors about flags point there.
	if file, line := os.Getenv("GOFILE"), os.Getenv("GOLINE"); file != "" && line != "" {
		cfg.Origin = file + ":" + line
	}
	if err := gen.Run(cfg); err != nil {
		var list gen.Errors
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(stderr, e)
			}
		} else {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	return 0
}
