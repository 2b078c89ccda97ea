package doccheck

import (
	"fmt"
	"strings"
)

// Command is one simple command of a shell block: its words after the
// environment assignments in front of it, and the directory a `cd` on the
// same line moved to (relative to the repository root; "" for the root).
type Command struct {
	Block Block    // the block that holds it
	Line  int      // the line in the Markdown file
	Dir   string   // where an earlier `cd` moved to ("" for the root)
	Env   []string // NAME=value words before the command
	Words []string // the command and its arguments
}

// Where names the command as file:line.
func (c Command) Where() string { return fmt.Sprintf("%s:%d", c.Block.File, c.Line) }

// ShellLangs are the fence languages read as shell commands.
var ShellLangs = []string{"sh", "bash", "shell"}

// Commands splits a shell block into its simple commands. Lines continued
// with a backslash are joined, comments dropped, and a line is split at &&,
// || and ;. A `cd DIR` applies to the rest of its line only: readers copy a
// line at a time.
func Commands(b Block) ([]Command, error) {
	var out []Command
	lines := strings.Split(strings.TrimSuffix(b.Body, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		line := lines[i]
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + lines[i]
		}
		words, err := splitWords(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", b.File, b.Line+1+start, err)
		}
		dir := ""
		for _, cmd := range splitOps(words) {
			c := Command{Block: b, Line: b.Line + 1 + start, Dir: dir}
			for len(cmd) > 0 && isAssignment(cmd[0]) {
				c.Env = append(c.Env, cmd[0])
				cmd = cmd[1:]
			}
			if len(cmd) == 0 {
				continue
			}
			c.Words = cmd
			if cmd[0] == "cd" && len(cmd) == 2 {
				dir = joinDir(dir, cmd[1])
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func joinDir(dir, sub string) string {
	if dir == "" {
		return sub
	}
	return dir + "/" + sub
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// splitOps splits words at the operators &&, || and ;.
func splitOps(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range words {
		if w == "&&" || w == "||" || w == ";" {
			out = append(out, cur)
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	return append(out, cur)
}

// splitWords splits a line into words as a POSIX shell would for the
// commands the docs write: single and double quotes, backslash escapes, a
// trailing ; and a comment that starts a word. $(...) stays inside its word.
func splitWords(line string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
		quote  rune
		depth  int // $( nesting
	)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			} else {
				cur.WriteRune(r)
			}
		case depth > 0:
			cur.WriteRune(r)
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			cur.WriteString("$(")
			i++
			depth, inWord = 1, true
		case r == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case r == '#' && !inWord:
			flush()
			return words, nil
		case r == ';':
			flush()
			words = append(words, ";")
		case r == ' ' || r == '\t':
			flush()
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	flush()
	return words, nil
}
