package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/internal/doccheck"
	"github.com/pginbox/pginbox/schema"
)

// TestBadFlagValues: every flag rejects a bad value before anything connects,
// naming the flag as the docs write it and the format it takes.
func TestBadFlagValues(t *testing.T) {
	t.Parallel()
	const id = "01J0000000000000000000000A"
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		// Ages and durations: overflow, negative, zero, beyond the bound.
		{[]string{"purge", "--older-than", "213504d"}, `--older-than "213504d": want a positive age like 720h, 90m or 30d, at most 36500d (100 years)`},
		{[]string{"purge", "--older-than", "106752d"}, `--older-than "106752d": want a positive age`},
		{[]string{"purge", "--older-than", "99999999999999999999d"}, `--older-than "99999999999999999999d": want a positive age`},
		{[]string{"purge", "--older-than", "36501d"}, `--older-than "36501d": want a positive age`},
		{[]string{"purge", "--older-than", "3000000h"}, `--older-than "3000000h": want a positive age`},
		{[]string{"purge", "--older-than", "-30d"}, `--older-than "-30d": want a positive age`},
		{[]string{"purge", "--older-than", "0d"}, `--older-than "0d": want a positive age`},
		{[]string{"purge", "--older-than", "0"}, `--older-than "0": want a positive age`},
		{[]string{"purge", "--older-than", "30 days"}, `--older-than "30 days": want a positive age`},
		{[]string{"purge", "--older-than"}, "--older-than needs a value"},
		{[]string{"purge", "--older-than", "30d", "--pause", "abc"}, `--pause "abc": want a duration like 100ms, 2s or 1m, from 0 to 1h`},
		{[]string{"purge", "--older-than", "30d", "--pause", "-1s"}, `--pause "-1s": want a duration like 100ms, 2s or 1m, from 0 to 1h`},
		{[]string{"purge", "--older-than", "30d", "--pause", "2h"}, `--pause "2h": want a duration like 100ms, 2s or 1m, from 0 to 1h`},
		{[]string{"purge", "--older-than", "30d", "--pause", "213504d"}, `--pause "213504d": want a duration`},
		{[]string{"list", "--since", "213504d"}, `--since "213504d": want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01, UTC) or an age (24h, 7d: that long ago, at most 36500d)`},
		{[]string{"list", "--until", "-1h"}, `--until "-1h": want RFC 3339`},
		{[]string{"list", "--since", "yesterday"}, `--since "yesterday": want RFC 3339`},
		// Numbers: format, overflow, range.
		{[]string{"purge", "--older-than", "30d", "--batch-size", "0"}, `--batch-size "0": want a whole number from 1 to 100000`},
		{[]string{"purge", "--older-than", "30d", "--batch-size", "100001"}, `--batch-size "100001": want a whole number from 1 to 100000`},
		{[]string{"purge", "--older-than", "30d", "--batch-size", "99999999999999999999"}, `--batch-size "99999999999999999999": want a whole number from 1 to 100000`},
		{[]string{"purge", "--older-than", "30d", "--batch-size", "1e3"}, `--batch-size "1e3": want a whole number from 1 to 100000`},
		{[]string{"list", "--limit", "-5"}, `--limit "-5": want a whole number from 1 to 1000`},
		{[]string{"list", "--limit", "1001"}, `--limit "1001": want a whole number from 1 to 1000`},
		{[]string{"requeue", id, "--version", "x", "--reason", "r"}, `--version "x": want a receipt version, at least 1`},
		{[]string{"requeue", id, "--version", "0", "--reason", "r"}, `--version "0": want a receipt version, at least 1`},
		{[]string{"replay", id, "--version", "9223372036854775808", "--reason", "r"}, `--version "9223372036854775808": want a receipt version, at least 1`},
		{[]string{"migrate", "down", "--to", "-1"}, fmt.Sprintf(`--to "-1": want a migration version from 0 to %d`, schema.Version)},
		{[]string{"migrate", "up", "--to", fmt.Sprint(schema.Version + 1)}, fmt.Sprintf(`--to "%d": want a migration version from 0 to %d`, schema.Version+1, schema.Version)},
		{[]string{"migrate", "up", "--to", "0"}, fmt.Sprintf("--to 0 applies to down only: up takes 1 to %d", schema.Version)},
		{[]string{"migrate", "status", "--to", "1"}, "--to applies to up and down only"},
		// Everything else.
		{[]string{"list", "--status", "DEAD,FOO"}, `--status "DEAD,FOO": want statuses separated by commas: PENDING, PROCESSING, RETRYABLE, COMPLETED, DEAD`},
		{[]string{"list", "--status", "DEAD,"}, `--status "DEAD,": want statuses separated by commas`},
		{[]string{"list", "--after", "zzz"}, "--after \"zzz\": want a receipt ID: a 26-character ULID (as `inbox list` prints it) or a UUID"},
		{[]string{"stats", "--json=maybe"}, `--json "maybe": want true or false`},
		{[]string{"purge", "--older-than", "30d", "--dry-run=2"}, `--dry-run "2": want true or false`},
		{[]string{"stats", "--tenant", ""}, `--tenant "": want a tenant ID, not an empty string`},
		{[]string{"stats", "--frobnicate"}, "unknown flag --frobnicate"},
		{[]string{"version", "--json=x"}, `--json "x": want true or false`},
	} {
		args := tc.args
		if args[0] != "version" { // the one command without a database
			args = append(append([]string{args[0]}, db...), args[1:]...)
		}
		code, stdout, stderr := runIn(t, nil, args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("inbox %s:\nexit %d, stdout %q, stderr %q\nwant exit %d and %q", strings.Join(tc.args, " "), code, stdout, stderr, exitUsage, tc.want)
			continue
		}
		if !strings.Contains(stderr, "run `inbox help "+tc.args[0]+"` for usage") {
			t.Errorf("inbox %s: no pointer to the help: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

// singleDash finds a flag written with one dash (-json) instead of two.
var singleDash = regexp.MustCompile(`(?:^|[\s\[(|,])(-[a-z][a-z-]*)`)

// oneDashFlag returns the first flag in s written with one dash, ignoring the
// goose and go commands' own flags that the schema docs quote.
func oneDashFlag(s string) string {
	for _, m := range singleDash.FindAllStringSubmatch(s, -1) {
		switch m[1] {
		case "-dir", "-table", "-m", "-f":
		default:
			return m[1]
		}
	}
	return ""
}

// TestHelpWritesDoubleDashFlags: every command's help writes its flags as
// --name, in the usage line, the text and the flag list. bench parses its own
// flags (internal/bench) and is checked there.
func TestHelpWritesDoubleDashFlags(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runIn(t, nil, "help")
	if code != exitOK {
		t.Fatalf("inbox help: exit %d", code)
	}
	if m := oneDashFlag(stdout); m != "" {
		t.Errorf("inbox help writes a flag with one dash (%q):\n%s", m, stdout)
	}
	// outbox and tenancy are groups: their subcommands are checked like commands.
	for _, c := range slices.Concat(orderedCommands(), outboxGroup.subs, tenancyGroup.subs) {
		if c.Name == "bench" || c.Name == "outbox" || c.Name == "tenancy" {
			continue
		}
		name := strings.Fields(c.Name) // "outbox stats" is two arguments
		code, stdout, stderr := runIn(t, nil, append([]string{"help"}, name...)...)
		if code != exitOK || stderr != "" {
			t.Errorf("inbox help %s: exit %d, stderr %q", c.Name, code, stderr)
			continue
		}
		if m := oneDashFlag(stdout); m != "" {
			t.Errorf("inbox help %s writes a flag with one dash (%q):\n%s", c.Name, m, stdout)
		}
		_, flags, hasFlags := strings.Cut(stdout, "\nFlags:\n")
		if c.Name == "help" {
			continue // the overview, checked above
		}
		if !hasFlags {
			t.Errorf("inbox help %s lists no flags:\n%s", c.Name, stdout)
		}
		for _, line := range strings.Split(strings.TrimSuffix(flags, "\n"), "\n") {
			if hasFlags && !strings.HasPrefix(line, "  --") && !strings.HasPrefix(line, "      ") {
				t.Errorf("inbox help %s: flag list line %q is neither '  --name' nor its description", c.Name, line)
			}
		}
		// -h and --help print the same help.
		for _, h := range []string{"-h", "--help"} {
			code, out, _ := runIn(t, nil, append(name, h)...)
			if code != exitOK || out != stdout {
				t.Errorf("inbox %s %s: exit %d, output differs from inbox help %s", c.Name, h, code, c.Name)
			}
		}
	}
}

// TestDocsInboxCommandsMatchHelp: every inbox command in the shell blocks of
// the docs (README.md, CONTRIBUTING.md, docs/*.md) exists, and every flag it
// gives is one `inbox help` lists for that command, written with two dashes.
// The CLI guide's prose writes flags with two dashes too.
func TestDocsInboxCommandsMatchHelp(t *testing.T) {
	t.Parallel()
	const root = "../.."
	blocks, err := doccheck.ParseAll(root)
	if err != nil {
		t.Fatal(err)
	}
	subs := map[string]bool{}
	for _, c := range slices.Concat(outboxGroup.subs, tenancyGroup.subs) {
		subs[c.Name] = true
	}
	flagRe := regexp.MustCompile(`--([a-z][a-z-]*)`)
	oneDash := regexp.MustCompile(`^[\[(]?-[a-z]`)
	helps := map[string]string{}
	checked := 0
	for _, b := range blocks {
		if !slices.Contains(doccheck.ShellLangs, b.Lang) {
			continue
		}
		cmds, err := doccheck.Commands(b)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range cmds {
			w := c.Words
			if len(w) > 2 && w[0] == "go" && w[1] == "run" && w[2] == "./cmd/inbox" {
				w = w[2:]
			}
			if len(w) < 2 || w[0] != "inbox" && w[0] != "./cmd/inbox" {
				continue
			}
			name, args := w[1], w[2:]
			if _, ok := commands[name]; !ok {
				t.Errorf("%s: `inbox %s` is not a command", c.Where(), name)
				continue
			}
			checked++
			if name == "bench" {
				continue // bench parses its own flags (internal/bench)
			}
			helpArgs := []string{"help", name}
			if len(args) > 0 && subs[name+" "+args[0]] {
				helpArgs = append(helpArgs, args[0])
			}
			key := strings.Join(helpArgs, " ")
			if _, ok := helps[key]; !ok {
				_, helps[key], _ = runIn(t, nil, helpArgs...)
			}
			for _, a := range args {
				if oneDash.MatchString(a) {
					t.Errorf("%s: `inbox %s` writes a flag with one dash: %q", c.Where(), name, a)
				}
				for _, f := range flagRe.FindAllStringSubmatch(a, -1) {
					if h := helps[key]; !strings.Contains(h, "\n  --"+f[1]+"\n") && !strings.Contains(h, "\n  --"+f[1]+" ") {
						t.Errorf("%s: `%s` has no flag --%s", c.Where(), strings.Replace(key, "help", "inbox", 1), f[1])
					}
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("found %d inbox commands in the docs' shell blocks, want the CLI guide's and the others'", checked)
	}
	cli, err := os.ReadFile(root + "/docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	if m := oneDashFlag(string(cli)); m != "" {
		t.Errorf("docs/CLI.md writes a flag with one dash: %q", m)
	}
}
