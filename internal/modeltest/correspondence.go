package modeltest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Kinds of mapping target that are not model actions.
const (
	// Read is a statement that changes no state the model tracks.
	Read = "read"
	// Outbox is a statement of the outbox relay, which the model does not cover.
	Outbox = "outbox"
)

// Steps are the model's actions that are no statement of queries/: what
// happens around the statements.
var Steps = map[string]string{
	"rollback":       "the handler failed: its transaction rolls back",
	"hang":           "the handler ignores its context and never returns",
	"leaseExpires":   "time: a lease runs out",
	"backoffElapses": "time: a retry becomes due",
	"crashWorker":    "a worker process dies",
	"serverCrash":    "the server restarts, possibly losing unflushed claims",
	"forge":          "a tenant's own SQL references another scope's receipt",
	"acceptCommits":  "without KEY_LOCK only: a keyed accept's transaction commits after its statements",
	"promoteAfter":   "without PROMOTE_IN_COMMIT only: the promotion in a transaction after the commit",
}

var (
	statementName = regexp.MustCompile(`(?m)^-- name: (\w+) :`)
	tableEntry    = regexp.MustCompile(`^\s*"(\w+)" -> "(\w+)",?\s*$`)
	actionDecl    = regexp.MustCompile(`(?m)^\s*action (\w+)`)
	moveBranch    = regexp.MustCompile(`^\s+(\w+)(\(.*\))?,\s*$`)
)

// Statements returns every statement name of dir/*.sql with the text of its
// statement.
func Statements(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		text := string(b)
		idx := statementName.FindAllStringSubmatchIndex(text, -1)
		for k, m := range idx {
			end := len(text)
			if k+1 < len(idx) {
				end = idx[k+1][0]
			}
			name := text[m[2]:m[3]]
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("statement %s is declared twice in %s", name, dir)
			}
			out[name] = text[m[0]:end]
		}
	}
	return out, nil
}

// Model is what the correspondence needs from the model's text.
type Model struct {
	// Table maps a statement name to the action standing for it (STATEMENTS).
	Table map[string]string
	// Actions are the declared actions.
	Actions map[string]bool
	// Moves are the actions the model's step chooses among (its move).
	Moves []string
}

// ParseModel reads the STATEMENTS table, the declared actions and the
// branches of the move action from the model's source.
func ParseModel(src string) (*Model, error) {
	m := &Model{Table: map[string]string{}, Actions: map[string]bool{}}
	inTable, inMove := false, false
	for _, line := range strings.Split(src, "\n") {
		switch {
		case strings.Contains(line, "pure val STATEMENTS"):
			inTable = true
			continue
		case inTable && strings.TrimSpace(line) == ")":
			inTable = false
			continue
		case strings.Contains(line, "action move = {"):
			inMove = true
			continue
		case inMove && strings.TrimSpace(line) == "}" && strings.HasPrefix(line, "    }"):
			inMove = false
			continue
		}
		if inTable {
			e := tableEntry.FindStringSubmatch(line)
			if e == nil {
				return nil, fmt.Errorf("STATEMENTS: cannot read %q", line)
			}
			if _, dup := m.Table[e[1]]; dup {
				return nil, fmt.Errorf("STATEMENTS lists %s twice", e[1])
			}
			m.Table[e[1]] = e[2]
		}
		if inMove {
			if b := moveBranch.FindStringSubmatch(line); b != nil && !strings.HasPrefix(strings.TrimSpace(line), "nondet") {
				m.Moves = append(m.Moves, b[1])
			}
		}
	}
	for _, a := range actionDecl.FindAllStringSubmatch(src, -1) {
		m.Actions[a[1]] = true
	}
	if len(m.Table) == 0 || len(m.Moves) == 0 {
		return nil, fmt.Errorf("model: no STATEMENTS table or no move action found")
	}
	return m, nil
}

// Mismatches lists every way the statements and the model disagree; none
// means they correspond one to one.
func Mismatches(stmts map[string]string, m *Model) []string {
	var out []string
	for name := range stmts {
		if _, ok := m.Table[name]; !ok {
			out = append(out, fmt.Sprintf("statement %s has no model action: add it to STATEMENTS in model/receipts.qnt with the action that stands for it (and model its transition)", name))
		}
	}
	covered := map[string]bool{}
	for name, action := range m.Table {
		if _, ok := stmts[name]; !ok {
			out = append(out, fmt.Sprintf("STATEMENTS lists %s, which no queries/*.sql declares: remove it", name))
		}
		covered[action] = true
		switch action {
		case Read:
			if w := writes(stmts[name]); w != "" {
				out = append(out, fmt.Sprintf("statement %s is listed as a read but runs %s: give it the action that models its change", name, w))
			}
		case Outbox:
		default:
			if !m.Actions[action] {
				out = append(out, fmt.Sprintf("STATEMENTS maps %s to %s, which the model does not declare", name, action))
			}
		}
	}
	moves := map[string]bool{}
	for _, a := range m.Moves {
		moves[a] = true
		if !covered[a] && Steps[a] == "" {
			out = append(out, fmt.Sprintf("model action %s is no statement and not a named step: map a statement to it or add it to Steps", a))
		}
	}
	for a := range covered {
		if a != Read && a != Outbox && !moves[a] {
			out = append(out, fmt.Sprintf("action %s stands for statements but the model's move never takes it", a))
		}
	}
	for a := range Steps {
		if !moves[a] {
			out = append(out, fmt.Sprintf("step %s is not among the model's moves", a))
		}
	}
	sort.Strings(out)
	return out
}

var writeVerb = regexp.MustCompile(`(?i)\b(INSERT\s+INTO|UPDATE\s+\w+\s+\w*\s*SET|DELETE\s+FROM)\b`)

// writes reports the first write a statement's text contains, ignoring comments.
func writes(stmt string) string {
	var code []string
	for _, l := range strings.Split(stmt, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		code = append(code, l)
	}
	return writeVerb.FindString(strings.Join(code, "\n"))
}
