package main

import (
	"errors"
	"flag"
	"io"
	"strings"

	"github.com/pginbox/pginbox/cmd/inbox/internal/flagdoc"
)

// errHelpShown ends a command after -h printed its help (exit code 0).
var errHelpShown = errors.New("help shown")

// newFlags returns the flag set of cmd; parse it with parseFlags.
func newFlags(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet("inbox "+cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// (`inbox show ID --json`), and returns the positional arguments. A rejected
// flag is named the way the docs write it (--name) with what it takes; the
// flag package's own messages say "-name" and "parse error".
func parseFlags(e *env, cmd *command, fs *flag.FlagSet, args []string) ([]string, error) {
	var bad *rejectedValue
	fs.VisitAll(func(f *flag.Flag) { f.Value = &checkedValue{Value: f.Value, name: f.Name, bad: &bad} })
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(e.stdout, cmd, fs)
			return nil, errHelpShown
		}
		if err != nil {
			return nil, flagError(err, bad)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// rejectedValue is a value a flag refused, kept for the error message.
type rejectedValue struct {
	name, value string
	err         error
}

// checkedValue records which flag refused which value.
type checkedValue struct {
	flag.Value
	name string
	bad  **rejectedValue
}

func (v *checkedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err == nil {
		return nil
	}
	if v.IsBoolFlag() {
		err = errors.New("want true or false") // the flag package says "parse error"
	}
	*v.bad = &rejectedValue{name: v.name, value: s, err: err}
	return err
}

// IsBoolFlag keeps --json and friends working without a value.
func (v *checkedValue) IsBoolFlag() bool { return flagdoc.IsBool(v.Value) }

// flagError turns a flag package error into a usage error in the docs' words.
func flagError(err error, bad *rejectedValue) error {
	if bad != nil {
		return usagef("--%s %q: %v", bad.name, bad.value, bad.err)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return usagef("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return usagef("--%s needs a value", name)
	}
	return usagef("%s", msg)
}
