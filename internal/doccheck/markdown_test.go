package doccheck

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	md := "intro\n<!-- scratch: run -->\n```sh\ngo mod init x\n```\n\ntext\n<!-- doc: fragment accept -->\n\n```go\nx := 1\n```\n```sql\nSELECT 1;\n```\n"
	blocks, err := Parse("x.md", strings.NewReader(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "x.md", Line: 3, Lang: "sh", Marker: Marker{Kind: "scratch", Args: []string{"run"}, Line: 2}, Body: "go mod init x\n"},
		{File: "x.md", Line: 10, Lang: "go", Marker: Marker{Kind: "doc", Args: []string{"fragment", "accept"}, Line: 8}, Body: "x := 1\n"},
		{File: "x.md", Line: 13, Lang: "sql", Body: "SELECT 1;\n"},
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %d blocks %+v, want %+v", len(blocks), blocks, want)
	}
	for i := range want {
		g, w := blocks[i], want[i]
		if g.File != w.File || g.Line != w.Line || g.Lang != w.Lang || g.Body != w.Body || g.Marker.Kind != w.Marker.Kind ||
			g.Marker.Line != w.Marker.Line || !slices.Equal(g.Marker.Args, w.Marker.Args) {
			t.Errorf("block %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ md, want string }{
		{"<!-- scratch: run -->\nno fence\n", "must be followed by a fenced block"},
		{"<!-- scratch: run -->\n", "marker without a fenced block"},
		{"```sh\ngo test\n", "never ends"},
		{"<!-- scratch: file ../escape.go -->\n```go\n```\n", "relative path"},
		{"<!-- doc: excerpt /abs.go -->\n```go\n```\n", "relative path"},
		{"<!-- scratch: build -->\n```sh\n```\n", "want <!-- scratch: run -->"},
		{"<!-- doc: compile -->\n```go\n```\n", "want <!-- doc: program -->"},
		{"<!-- doc: fragment -->\n```go\n```\n", "want <!-- doc: program -->"},
		{"<!-- scratch: run\n```sh\n```\n", "ending in -->"},
	} {
		_, err := Parse("x.md", strings.NewReader(tc.md))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): got %v, want an error containing %q", tc.md, err, tc.want)
		}
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	b := Block{File: "x.md", Line: 10, Lang: "sh", Body: "make demo    # the main job\n" +
		"cd cmd/inbox/otelbench && go run . -calls 2000 # comment\n" +
		"DATABASE_URL=postgres://o@db/shop inbox migrate up\n" +
		"go test -race -run 'Citus|X' \\\n  ./inbox/... ./outbox\n" +
		"goose -dir \"$(go list -m -f '{{.Dir}}' x)/schema\" up\n"}
	cmds, err := Commands(b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, strings.Join([]string{c.Where(), c.Dir, strings.Join(c.Env, ","), strings.Join(c.Words, "|")}, " "))
	}
	want := []string{
		"x.md:11   make|demo",
		"x.md:12   cd|cmd/inbox/otelbench",
		"x.md:12 cmd/inbox/otelbench  go|run|.|-calls|2000",
		"x.md:13  DATABASE_URL=postgres://o@db/shop inbox|migrate|up",
		"x.md:14   go|test|-race|-run|Citus|X|./inbox/...|./outbox",
		"x.md:16   goose|-dir|$(go list -m -f '{{.Dir}}' x)/schema|up",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMatchExcerpt(t *testing.T) {
	t.Parallel()
	file := "package x\n\n// A is a.\ntype A struct {\n\tN int\n}\n\nfunc f() {\n\tg()\n\th()\n}\n"
	for _, tc := range []struct {
		excerpt string
		ok      bool
	}{
		{"type A struct {\n    N int\n}\n", true},
		{"type A struct {\n// ...\n}\nfunc f() {\n", true},
		{"func f() {\n\th()\n", false},              // h is not right after the brace
		{"func f() {\n// ...\n\th()\n}\n", true},    // ... skips g()
		{"func f() {\n}\ntype A struct {\n", false}, // order matters
		{"type A struct {\n\tN string\n}\n", false}, // changed
	} {
		if _, ok := MatchExcerpt(tc.excerpt, file); ok != tc.ok {
			t.Errorf("MatchExcerpt(%q) = %v, want %v", tc.excerpt, ok, tc.ok)
		}
	}
}

// TestBuildReportsTheDocLine: a block that stops compiling fails with the
// Markdown line of the error, for a whole program and for a fragment.
func TestBuildReportsTheDocLine(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	blocks := []Block{
		{File: "x.md", Line: 20, Lang: "go", Marker: Marker{Kind: "doc", Args: []string{"program"}},
			Body: "package main\n\nimport \"github.com/pginbox/pginbox/inbox\"\n\nfunc main() {\n\t_ = inbox.Tenant(42)\n}\n"},
		{File: "x.md", Line: 40, Lang: "go", Marker: Marker{Kind: "doc", Args: []string{"fragment", "client"}},
			Body: "_ = client\nres, err := client.Accept(ctx, 7)\n"},
		{File: "x.md", Line: 60, Lang: "go", Marker: Marker{Kind: "doc", Args: []string{"file"}},
			Body: "package fine\n\nimport \"github.com/pginbox/pginbox/inbox\"\n\nvar S = inbox.Tenant(\"acme\")\n"},
	}
	_, problems, err := Build(context.Background(), root, blocks, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"x.md:26: cannot use 42", "x.md:42: cannot use 7"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not include %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "x.md:6") {
		t.Errorf("the block that compiles was reported:\n%s", all)
	}
}
