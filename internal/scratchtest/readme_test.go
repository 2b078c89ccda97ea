package scratchtest

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	steps, err := Parse(strings.NewReader("intro\n<!-- scratch: run -->\n```sh\ngo mod init x\n```\n\ntext\n<!-- scratch: file cmd/x/main.go -->\n\n```go\npackage main\n\nfunc main() {}\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Line: 2, Run: true, Body: "go mod init x\n"},
		{Line: 8, Path: "cmd/x/main.go", Body: "package main\n\nfunc main() {}\n"},
	}
	if len(steps) != len(want) {
		t.Fatalf("got %d steps %+v, want %+v", len(steps), steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d: got %+v, want %+v", i, steps[i], want[i])
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ readme, want string }{
		{"<!-- scratch: run -->\nno fence\n", "must be followed by a fenced block"},
		{"<!-- scratch: run -->\n```sh\ngo test\n", "without a complete fenced block"},
		{"<!-- scratch: file ../escape.go -->\n```go\n```\n", "relative/path"},
		{"<!-- scratch: file /abs.go -->\n```go\n```\n", "relative/path"},
		{"<!-- scratch: build -->\n```sh\n```\n", "want <!-- scratch: run -->"},
		{"<!-- scratch: run\n```sh\n```\n", "ending in -->"},
	} {
		_, err := Parse(strings.NewReader(tc.readme))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): got %v, want an error containing %q", tc.readme, err, tc.want)
		}
	}
}
