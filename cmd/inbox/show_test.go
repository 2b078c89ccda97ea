package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestShowSaysWhatVersionAndAttemptsAre: a reader of `inbox show` learns what
// the version is for (requeue, replay and skip take it) and what the attempts
// count, without the JSON output changing shape.
func TestShowSaysWhatVersionAndAttemptsAre(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := map[string]string{envDatabaseURL: f.dsn}
	code, stdout, stderr := runIn(t, db, "show", f.dead.String())
	if code != exitOK {
		t.Fatalf("inbox show: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"version      3 (changes so far; requeue, replay and skip take it as --version)\n",
		"attempts     1 of 10 (tries used of the retry budget)\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inbox show does not print %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = runIn(t, db, "show", f.dead.String(), "--json")
	if code != exitOK {
		t.Fatalf("inbox show --json: exit %d: %s", code, stderr)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d["version"] != 3.0 || d["attempts"] != 1.0 || d["max_attempts"] != 10.0 {
		t.Errorf("inbox show --json: version %v, attempts %v of %v; want the numbers 3, 1 and 10", d["version"], d["attempts"], d["max_attempts"])
	}
}
