package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/outbox"
)

// outboxCmd is `inbox outbox <subcommand>`: the outbox's operations. Each
// subcommand is a command of its own (cmd_outbox_*.go), named "outbox NAME"
// so its help and errors read like a top-level command's.
var outboxCmd = &command{
	Name:    "outbox",
	Args:    "stats|list|show|requeue|purge [arguments] [flags]",
	Summary: "the outbox's events: stats, list, show, requeue DEAD ones, purge published history",
	Help: `
The outbox holds the events services emitted in their transactions until a
relay publishes them (package outbox). These commands read and repair it
across scopes (an event has the scope of the transaction that emitted it): with
tenancy enabled, connect as a role with BYPASSRLS.

Run ` + "`inbox help outbox <subcommand>`" + ` for a subcommand's flags.`,
}

// outboxCommands are the subcommands, in the order help lists them.
var outboxCommands []*command

// outboxOrder is the order a new user meets the subcommands in.
var outboxOrder = []string{"outbox stats", "outbox list", "outbox show", "outbox requeue", "outbox purge"}

func registerOutbox(c *command) {
	outboxCommands = append(outboxCommands, c)
	slices.SortStableFunc(outboxCommands, func(a, b *command) int {
		return slices.Index(outboxOrder, a.Name) - slices.Index(outboxOrder, b.Name)
	})
}

func init() {
	outboxCmd.Run = runOutbox
	register(outboxCmd)
}

func runOutbox(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		printOutboxHelp(e.stderr)
		return exitStatus(exitUsage)
	}
	if slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		printOutboxHelp(e.stdout)
		return nil
	}
	for _, c := range outboxCommands {
		if c.Name == "outbox "+args[0] {
			// The subcommand reports its own errors, under its own name.
			if code := e.report(ctx, c, c.Run(ctx, e, args[1:])); code != exitOK {
				return exitStatus(code)
			}
			return nil
		}
	}
	return usagef("unknown subcommand %q: want stats, list, show, requeue or purge", args[0])
}

func printOutboxHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: inbox %s %s\n\n%s\n\n", outboxCmd.Name, outboxCmd.Args, outboxCmd.Summary)
	tw := newTable(w)
	for _, c := range outboxCommands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprintln(w, outboxCmd.Help)
}

// outboxAdmin connects, checks the schema and returns the outbox's admin.
func outboxAdmin(ctx context.Context, e *env, d *dbFlags) (*outbox.Admin, func(), error) {
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return nil, nil, err
	}
	if err := checkOutboxVisible(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	admin, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: discardLogger})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return admin, pool.Close, nil
}

// errOutboxRestricted: row-level security would show this role no event, and
// an empty answer would read as "nothing to do".
var errOutboxRestricted = errors.New("row-level security hides the outbox's events from this role, and these commands work across tenants: " +
	"connect as a role with BYPASSRLS (`inbox tenancy grant ROLE --system`)")

func checkOutboxVisible(ctx context.Context, pool *pgxpool.Pool) error {
	var restricted bool
	if err := pool.QueryRow(ctx, "SELECT row_security_active('pginbox_outbox')").Scan(&restricted); err != nil {
		return fmt.Errorf("reading the outbox's row-level security: %w", err)
	}
	if restricted {
		return errOutboxRestricted
	}
	return nil
}
