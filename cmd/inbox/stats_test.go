package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestStatsJSON: stats --json carries data only: the scope as an object, and
// null (not 0) for the backlog age of a consumer with nothing due.
func TestStatsJSON(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	db := map[string]string{"DATABASE_URL": f.dsn}
	stats := func(args ...string) map[string]any {
		t.Helper()
		code, stdout, stderr := runIn(t, db, append([]string{"stats", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("inbox stats --json %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		var out map[string]any
		is.NoErr(json.Unmarshal([]byte(stdout), &out))
		return out
	}
	consumer := func(st map[string]any) map[string]any {
		t.Helper()
		cs := st["consumers"].([]any)
		is.Equal(len(cs), 1)
		return cs[0].(map[string]any)
	}

	// tenant-a: one DEAD, one COMPLETED, nothing due.
	st := stats("--tenant", "tenant-a")
	is.Equal(st["scope"], map[string]any{"kind": "tenant", "id": "tenant-a"})
	c := consumer(st)
	is.Equal(c["due"], 0.0)
	v, ok := c["oldest_due_age_seconds"]
	is.True(ok)      // the field is there
	is.Equal(v, nil) // and null, since nothing is due
	is.Equal(c["completed"], nil)

	// global: one PENDING receipt, due since the fixture accepted it.
	st = stats("--global", "--completed")
	is.Equal(st["scope"], map[string]any{"kind": "global"})
	c = consumer(st)
	is.Equal(c["due"], 1.0)
	age, ok := c["oldest_due_age_seconds"].(float64)
	is.True(ok) // a number when something is due
	is.True(age >= 0)
	is.Equal(c["completed"], 0.0)

	st = stats()
	is.Equal(st["scope"], map[string]any{"kind": "all"})
	is.Equal(st["dead"], 2.0)

	// The shape is documented where operators look.
	_, help, _ := runIn(t, nil, "help", "stats")
	for _, field := range []string{`"scope": {"kind": "all"}`, `{"kind": "tenant", "id": "acme"}`, `"oldest_due_age_seconds": 12.5   null when nothing is due`, `"completed": 40,                 null without --completed`} {
		is.True(strings.Contains(help, field)) // inbox help stats documents the JSON
	}
}
