package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pginbox/pginbox/cmd/inbox/internal/flagdoc"
)

func init() {
	register(&command{
		Name:    "help",
		Args:    "[command]",
		Summary: "show this help, or a command's flags",
		Run: func(ctx context.Context, e *env, args []string) error {
			if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
				printHelp(e.stdout)
				return nil
			}
			cmd, ok := commands[args[0]]
			if !ok {
				return usagef("unknown command %q", args[0])
			}
			// `inbox help outbox stats` is `inbox outbox stats -h`.
			return cmd.Run(ctx, e, append(args[1:], "-h"))
		},
	})
}

// helpOrder lists commands in the order a new user meets them; commands
// registered later (bench) follow in name order.
var helpOrder = []string{"demo", "migrate", "stats", "list", "show", "requeue", "skip", "replay", "purge", "outbox", "tenancy", "bench", "version", "help"}

func orderedCommands() []*command {
	var out []*command
	for _, name := range helpOrder {
		if c, ok := commands[name]; ok {
			out = append(out, c)
		}
	}
	var rest []string
	for name := range commands {
		if !slices.Contains(helpOrder, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		out = append(out, commands[name])
	}
	return out
}

const helpIntro = `inbox is the operator CLI of pginbox, a transactional inbox on PostgreSQL.

Usage:
  inbox <command> [arguments] [flags]

Commands:
`

const helpOutro = `
Database: --database-url or $DATABASE_URL (a PostgreSQL URL or key=value DSN).
Scope (stats, list, show, requeue, skip, replay, purge): --tenant ID for one tenant,
--global for global-scope receipts; the default is every scope (operator view).
With tenancy enabled (` + "`inbox tenancy status`" + `), every scope needs a role with
BYPASSRLS; a role without it passes --tenant or --global.
Output: tables for people, with control and bidirectional characters of stored
text shown escaped (\u202e, \x1b); --json for scripts, text as stored. Flags
may follow arguments.

Exit codes:
  0    success
  1    error (connection, SQL, I/O)
  2    usage: bad command, flag or argument
  3    not found: no receipt with that ID in the chosen scope (or no such
       outbox event)
  4    refused, nothing changed: version conflict, wrong state, purged payload
  5    schema not migrated (or at another version): run ` + "`inbox migrate up`" + `
  130  interrupted (Ctrl-C, SIGTERM)
Only the built binary exits with these: ` + "`go run ./cmd/inbox`" + ` exits 1 for every
failure. Scripts build or install it (` + "`go install ./cmd/inbox`" + `).

Run ` + "`inbox help <command>`" + ` for a command's flags.
`

func printHelp(w io.Writer) {
	fmt.Fprint(w, helpIntro)
	tw := newTable(w)
	for _, c := range orderedCommands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprint(w, helpOutro)
}

func printCommandHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: inbox %s %s\n\n%s\n", cmd.Name, cmd.Args, cmd.Summary)
	if cmd.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.Help))
	}
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprint(w, "\nFlags:\n")
		flagdoc.Print(w, fs)
	}
}
