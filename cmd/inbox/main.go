// Command inbox is pginbox's operator CLI: it migrates the schema, inspects and
// repairs receipts (stats, list, show, requeue, replay, purge) and outbox
// events, turns on row-level security per tenant (tenancy) and runs the demo.
// Run `inbox help` for the commands and exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"syscall"

	"github.com/pginbox/pginbox/cmd/inbox/internal/term"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/visible"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

// Exit codes, documented in `inbox help`.
const (
	exitOK          = 0
	exitError       = 1   // anything else: connection, SQL, I/O
	exitUsage       = 2   // bad command line
	exitNotFound    = 3   // no such receipt in the chosen scope
	exitRefused     = 4   // version conflict, wrong state or purged payload: nothing changed
	exitNotMigrated = 5   // schema missing or at another version
	exitInterrupted = 130 // SIGINT/SIGTERM
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand. Each lives in its own cmd_*.go file and registers
// itself in init, so adding one (e.g. bench) touches no other file.
type command struct {
	Name    string
	Args    string // what follows the name in the usage line
	Summary string // one line for `inbox help`
	Help    string // paragraphs for `inbox help <name>`
	Run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("inbox: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// env is what a command may touch besides the database, so tests can run
// commands in-process.
type env struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// currentUser is os/user.Current: the fallback actor of requeue and replay.
	currentUser func() (*user.User, error)
	// tty reports whether stdout is a terminal: live progress lines redraw in
	// place there, and print as plain lines otherwise.
	tty bool
	// size reports the terminal's columns and rows (ok false when unknown),
	// so a live view can redraw in place however its lines wrap.
	size func() (cols, rows int, ok bool)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, getenv: os.Getenv, currentUser: user.Current, tty: term.IsTerminal(stdout),
		size: func() (int, int, bool) { return term.Size(stdout) }}
	return e.run(ctx, args)
}

func (e *env) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		printHelp(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.stderr, "inbox: unknown command %q\nrun `inbox help` for the list of commands\n", name)
		return exitUsage
	}
	err := cmd.Run(ctx, e, args[1:])
	return e.report(ctx, cmd, err)
}

// report prints err for a person and maps it to an exit code.
func (e *env) report(ctx context.Context, cmd *command, err error) int {
	if err == nil || errors.Is(err, errHelpShown) {
		return exitOK
	}
	var status exitStatus
	if errors.As(err, &status) {
		return int(status) // the command already said why
	}
	var ue *usageError
	var ve *inbox.ValidationError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "inbox %s: %s\nrun `inbox help %s` for usage\n", cmd.Name, visible.Text(ue.msg), cmd.Name)
		return exitUsage
	case errors.As(err, &ve) && validatedFlags[ve.Field] != "":
		// The admin API checks these values; name the flag they came from.
		fmt.Fprintf(e.stderr, "inbox %s: %s: %s\nrun `inbox help %s` for usage\n", cmd.Name, validatedFlags[ve.Field], visible.Text(ve.Detail), cmd.Name)
		return exitUsage
	}
	if ctx.Err() != nil {
		// Whatever failed, it failed because the user interrupted it.
		fmt.Fprintf(e.stderr, "inbox %s: interrupted\n", cmd.Name)
		return exitInterrupted
	}
	// Errors may carry stored text (a database message quoting a value):
	// nothing raw reaches the terminal.
	fmt.Fprintf(e.stderr, "inbox %s: %s\n", cmd.Name, visible.Text(strings.TrimPrefix(err.Error(), "pginbox: ")))
	code := exitCode(err)
	if h := hint(err); h != "" {
		fmt.Fprintf(e.stderr, "hint: %s\n", h)
	}
	return code
}

// validatedFlags maps the fields the admin API validates itself to the flags
// they come from.
var validatedFlags = map[string]string{
	"scope.id": "--tenant",
	"actor":    "--actor",
	"reason":   "--reason",
}

func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, inbox.ErrNotFound), errors.Is(err, outbox.ErrNotFound):
		return exitNotFound
	case errors.Is(err, inbox.ErrVersionConflict), errors.Is(err, inbox.ErrWrongState), errors.Is(err, inbox.ErrPayloadPurged),
		errors.Is(err, outbox.ErrVersionConflict), errors.Is(err, outbox.ErrWrongState):
		return exitRefused
	case errors.Is(err, schema.ErrNotMigrated):
		return exitNotMigrated
	case errors.Is(err, inbox.ErrInvalid):
		return exitUsage
	default:
		return exitError
	}
}

func hint(err error) string {
	var vc *inbox.VersionConflictError
	switch {
	case errors.As(err, &vc):
		return fmt.Sprintf("run `inbox show %s` to see what changed, then retry with --version %d if the %s still applies", vc.ReceiptID, vc.Current, vc.Action)
	case errors.Is(err, inbox.ErrNotFound):
		return "check the ID with `inbox list`; with --tenant or --global only that scope's receipts are visible"
	case errors.Is(err, inbox.ErrTenancyRestricted):
		return "pass --tenant ID (or --global) to see one scope, or connect as a role with BYPASSRLS for every scope (`inbox tenancy grant ROLE --system`)"
	case errors.Is(err, outbox.ErrNotFound):
		return "check the ID with `inbox outbox list`; relays delete PUBLISHED events after their retention"
	case errors.Is(err, outbox.ErrVersionConflict):
		return "run `inbox outbox show ID` to see what changed"
	}
	return ""
}

// usageError is a mistake on the command line (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}
