package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// commandGroup is a command whose subcommands are commands of their own,
// named "<group> NAME" so their help and errors read like a top-level
// command's (inbox outbox ..., inbox tenancy ...).
type commandGroup struct {
	cmd   *command
	order []string   // subcommand names, in the order a new user meets them
	subs  []*command // the registered subcommands, in that order
}

// newCommandGroup registers cmd as a group whose subcommands are named
// "<cmd.Name> NAME" for each NAME in order.
func newCommandGroup(cmd *command, order ...string) *commandGroup {
	g := &commandGroup{cmd: cmd}
	for _, name := range order {
		g.order = append(g.order, cmd.Name+" "+name)
	}
	cmd.Run = g.run
	register(cmd)
	return g
}

// add registers a subcommand of the group.
func (g *commandGroup) add(c *command) {
	g.subs = append(g.subs, c)
	slices.SortStableFunc(g.subs, func(a, b *command) int {
		return slices.Index(g.order, a.Name) - slices.Index(g.order, b.Name)
	})
}

func (g *commandGroup) run(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		g.printHelp(e.stderr)
		return exitStatus(exitUsage)
	}
	if slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		g.printHelp(e.stdout)
		return nil
	}
	for _, c := range g.subs {
		if c.Name == g.cmd.Name+" "+args[0] {
			// The subcommand reports its own errors, under its own name.
			if code := e.report(ctx, c, c.Run(ctx, e, args[1:])); code != exitOK {
				return exitStatus(code)
			}
			return nil
		}
	}
	return usagef("unknown subcommand %q: want %s", args[0], g.choices())
}

// choices lists the subcommand names as a sentence: "a, b or c".
func (g *commandGroup) choices() string {
	names := make([]string, len(g.order))
	for i, full := range g.order {
		names[i] = strings.TrimPrefix(full, g.cmd.Name+" ")
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (g *commandGroup) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: inbox %s %s\n\n%s\n\n", g.cmd.Name, g.cmd.Args, g.cmd.Summary)
	tw := newTable(w)
	for _, c := range g.subs {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprintln(w, g.cmd.Help)
}
