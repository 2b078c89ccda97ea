package main

import (
	"strings"
	"testing"
)

// TestAPIValidationNamesFlags: values the admin API validates (tenant ID,
// actor, reason) are reported as usage errors naming the flag.
func TestAPIValidationNamesFlags(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := map[string]string{"DATABASE_URL": f.dsn, "USER": "tester"}
	id := f.dead.String()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{db, []string{"stats", "--tenant", strings.Repeat("t", 256)}, "inbox stats: --tenant: 256 bytes: at most 255 allowed"},
		{db, []string{"show", id, "--tenant", "a\tb"}, "inbox show: --tenant: control character U+0009 at byte 1"},
		{db, []string{"requeue", id, "--version", "3", "--reason", strings.Repeat("r", 1025)}, "inbox requeue: --reason: 1025 bytes: at most 1024 allowed"},
		{db, []string{"replay", id, "--version", "3", "--reason", "x", "--actor", "bell\a"}, "inbox replay: --actor: control character U+0007 at byte 4"},
		{map[string]string{"DATABASE_URL": f.dsn, "USER": strings.Repeat("u", 300)}, []string{"requeue", id, "--version", "3", "--reason", "x"},
			"inbox requeue: --actor: 300 bytes: at most 255 allowed"},
	} {
		code, stdout, stderr := runIn(t, tc.env, tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "run `inbox help "+tc.args[0]+"` for usage") {
			t.Errorf("inbox %.60s: exit %d, stdout %q, stderr %q\nwant exit %d and %q", strings.Join(tc.args, " "), code, stdout, stderr, exitUsage, tc.want)
		}
	}
	// Nothing changed.
	code, stdout, _ := runIn(t, db, "show", id)
	if code != exitOK || !strings.Contains(stdout, "status       DEAD") {
		t.Errorf("inbox show after refused changes: exit %d\n%s", code, stdout)
	}
}
