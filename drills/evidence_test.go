package drills

import (
	"strings"
	"testing"

	"github.com/pginbox/pginbox/internal/drillkit"
)

// A drill whose load sent fewer messages than planned proves nothing about
// the rest: it fails, as does one with unacknowledged messages.
func TestLoadProblems(t *testing.T) {
	acked := func(n int) []string { return make([]string, n) }
	for _, c := range []struct {
		name string
		out  drillkit.Outcome
		want string
	}{
		{"complete", drillkit.Outcome{Planned: 3, Sent: 3, Acked: acked(3)}, ""},
		{"cut short", drillkit.Outcome{Planned: 3, Sent: 2, Acked: acked(2)}, "2 of 3 planned messages sent"},
		{"nothing planned", drillkit.Outcome{}, "0 of 0 planned messages sent"},
		{"given up", drillkit.Outcome{Planned: 3, Sent: 3, Acked: acked(2), GaveUp: []string{"x"}}, "2 of 3 messages acknowledged, 1 given up"},
	} {
		got := strings.Join(loadProblems(c.out), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: problems %q, want %q", c.name, got, c.want)
		}
	}
}
