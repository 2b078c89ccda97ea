package main

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// tenancyCmd is `inbox tenancy <subcommand>`: row-level security on pginbox's
// tables and the roles that work under it. Like outbox, each subcommand is a
// command of its own, named "tenancy NAME".
var tenancyCmd = &command{
	Name:    "tenancy",
	Args:    "status|grant|enable|disable [arguments] [flags]",
	Summary: "row-level security on pginbox's tables: status, enable, disable, grant a role",
	Help: `
With tenancy enabled, PostgreSQL itself keeps each tenant's receipts, work,
audit rows and outbox events apart: a role without BYPASSRLS sees and writes
only the scope its transaction set (pginbox sets it wherever it opens one).
The order: ` + "`inbox migrate up`" + `, create the roles, ` + "`inbox tenancy grant`" + ` each one,
` + "`inbox tenancy enable`" + `. See docs/TENANCY.md.

Run ` + "`inbox help tenancy <subcommand>`" + ` for a subcommand's flags.`,
}

// tenancyCommands are the subcommands, in the order help lists them.
var tenancyCommands []*command

// tenancyOrder is the order a new user meets the subcommands in.
var tenancyOrder = []string{"tenancy status", "tenancy grant", "tenancy enable", "tenancy disable"}

func registerTenancy(c *command) {
	tenancyCommands = append(tenancyCommands, c)
	slices.SortStableFunc(tenancyCommands, func(a, b *command) int {
		return slices.Index(tenancyOrder, a.Name) - slices.Index(tenancyOrder, b.Name)
	})
}

func init() {
	tenancyCmd.Run = runTenancy
	register(tenancyCmd)
}

func runTenancy(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		printTenancyHelp(e.stderr)
		return exitStatus(exitUsage)
	}
	if slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		printTenancyHelp(e.stdout)
		return nil
	}
	for _, c := range tenancyCommands {
		if c.Name == "tenancy "+args[0] {
			// The subcommand reports its own errors, under its own name.
			if code := e.report(ctx, c, c.Run(ctx, e, args[1:])); code != exitOK {
				return exitStatus(code)
			}
			return nil
		}
	}
	return usagef("unknown subcommand %q: want status, grant, enable or disable", args[0])
}

func printTenancyHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: inbox %s %s\n\n%s\n\n", tenancyCmd.Name, tenancyCmd.Args, tenancyCmd.Summary)
	tw := newTable(w)
	for _, c := range tenancyCommands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprintln(w, tenancyCmd.Help)
}
