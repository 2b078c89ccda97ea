package gen_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/gen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/gen")

const fixtures = "../testdata/gen"

var goldenCases = []struct {
	dir     string
	queries string
}{
	{dir: "basic"},
	{dir: "queries", queries: "github.com/pginbox/pginbox/testdata/gen/queries/appdb"},
	{dir: "localqueries", queries: "github.com/pginbox/pginbox/testdata/gen/localqueries"},
	{dir: "emits"},
	{dir: "emitonly"},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.dir, func(t *testing.T) {
			is := is.New(t)
			dir := filepath.Join(fixtures, tc.dir)
			path, got, err := gen.Generate(gen.Config{Dir: dir, Queries: tc.queries})
			is.NoErr(err)
			is.Equal(path, filepath.Join(dir, gen.DefaultOutput))
			is.True(bytes.HasPrefix(got, []byte(gen.Header+"\n")))

			// Same input, same bytes: the drift check depends on it.
			_, again, err := gen.Generate(gen.Config{Dir: dir, Queries: tc.queries})
			is.NoErr(err)
			is.Equal(string(again), string(got))

			if *update {
				is.NoErr(os.WriteFile(path, got, 0o644))
				return
			}
			want, err := os.ReadFile(path)
			is.NoErr(err)
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the generator's output; run `go test ./gen -run TestGolden -update` and review the diff.\n--- got:\n%s", path, got)
			}
		})
	}
}

// TestGoldenCompiles builds the golden packages: matching bytes are worthless
// if they do not compile.
func TestGoldenCompiles(t *testing.T) {
	if *update {
		t.Skip("golden files are being rewritten")
	}
	args := []string{"vet"}
	for _, tc := range goldenCases {
		args = append(args, filepath.ToSlash(filepath.Join(fixtures, tc.dir)))
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRunKeepsUnchangedFile(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"events.go": "package p\n\n//inbox:event type=a version=1 consumers=b\ntype A struct{}\n"})
	cfg := gen.Config{Dir: dir}
	is.NoErr(gen.Run(cfg))
	out := filepath.Join(dir, gen.DefaultOutput)
	old := time.Unix(1, 0)
	is.NoErr(os.Chtimes(out, old, old))
	is.NoErr(gen.Run(cfg)) // the output file itself is not read as input
	st, err := os.Stat(out)
	is.NoErr(err)
	is.True(st.ModTime().Equal(old))
}

// An error case is a package written to a temp dir; every wanted substring,
// including the file:line, must appear in the error.
func TestErrors(t *testing.T) {
	const struct1 = "type A struct{}\n"
	long := strings.Repeat("x", 256)
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "unknown key",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b colour=red\n" + struct1},
			want:  []string{"e.go:3:1", `unknown key "colour"`, "known keys: type, version, consumers, unknown, ordering"},
		},
		{
			name:  "ordering field missing",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b ordering=OrderID\ntype A struct{ ID string }\n"},
			want:  []string{"e.go:3:1", "ordering=OrderID: A has no field OrderID"},
		},
		{
			name:  "ordering field not a string",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b ordering=N\ntype A struct{ N int }\n"},
			want:  []string{"e.go:3:1", "ordering field N of A must be a string field"},
		},
		{
			name:  "key given twice",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a type=b version=1 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", `key "type" given twice`},
		},
		{
			name: "duplicate type and version",
			files: map[string]string{
				"a.go": "package p\n\n//inbox:event type=order.created version=1 consumers=b\n" + struct1,
				"b.go": "package p\n\n\n//inbox:event type=order.created version=1 consumers=c\ntype B struct{}\n",
			},
			want: []string{"b.go:4:1", "order.created v1 is already declared by A at", "a.go:3:1"},
		},
		{
			name:  "non-struct target",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\ntype A string\n"},
			want:  []string{"e.go:4:6", "A is not a struct type"},
		},
		{
			name:  "interface target",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\ntype A interface{ M() }\n"},
			want:  []string{"e.go:4:6", "A is not a struct type"},
		},
		{
			name:  "alias target",
			files: map[string]string{"e.go": "package p\n\ntype B struct{}\n\n//inbox:event type=a version=1 consumers=b\ntype A = B\n"},
			want:  []string{"e.go:6:6", "A is an alias, not a struct type"},
		},
		{
			name:  "generic target",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\ntype A[T any] struct{ V T }\n"},
			want:  []string{"e.go:4:6", "A is generic"},
		},
		{
			name:  "missing version",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", "missing version"},
		},
		{
			name:  "missing type and consumers",
			files: map[string]string{"e.go": "package p\n\n//inbox:event version=1\n" + struct1},
			want:  []string{"e.go:3:1: //inbox:event on A: missing type", "e.go:3:1: //inbox:event on A: missing consumers"},
		},
		{
			name:  "version zero",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=0 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", `version must be an integer between 1 and 2147483647, got "0"`},
		},
		{
			name:  "version not a number",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=v1 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", `got "v1"`},
		},
		{
			name:  "event type too long",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=" + long + " version=1 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", "event type", "256 bytes: at most 255 allowed"},
		},
		{
			name:  "event type with a control character",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=\"a\\tb\" version=1 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", `event type "a\tb": control character U+0009 at byte 1`},
		},
		{
			name:  "consumer with invalid UTF-8",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=\"b\\xff\"\n" + struct1},
			want:  []string{"e.go:3:1", `consumer "b\xff": invalid UTF-8 at byte 1`},
		},
		{
			name:  "empty consumer",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b,\n" + struct1},
			want:  []string{"e.go:3:1", `consumer "": must not be empty`},
		},
		{
			name:  "consumer listed twice",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b,b\n" + struct1},
			want:  []string{"e.go:3:1", `consumer "b" listed twice`},
		},
		{
			name:  "bad unknown policy",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b unknown=ignore\n" + struct1},
			want:  []string{"e.go:3:1", `unknown must be "reject" or "allow", got "ignore"`},
		},
		{
			name:  "not key=value",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b strict\n" + struct1},
			want:  []string{"e.go:3:1", `"strict" is not key=value`},
		},
		{
			name:  "unterminated quote",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=\"a version=1 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", "unterminated quoted value for type"},
		},
		{
			name:  "directive not on a type",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\n\ntype A struct{}\n"},
			want:  []string{"e.go:3:1", "must be in the doc comment of a package-level type declaration"},
		},
		{
			name:  "directive on a func",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\nfunc F() {}\n"},
			want:  []string{"e.go:3:1", "must be in the doc comment of a package-level type declaration"},
		},
		{
			name:  "directive on a local type",
			files: map[string]string{"e.go": "package p\n\nfunc F() {\n\t//inbox:event type=a version=1 consumers=b\n\ttype A struct{}\n\t_ = A{}\n}\n"},
			want:  []string{"e.go:4:2", "package-level type declaration"},
		},
		{
			name:  "directive on a type group",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\ntype (\n\tA struct{}\n)\n"},
			want:  []string{"e.go:3:1", "above a type group"},
		},
		{
			name:  "unknown directive",
			files: map[string]string{"e.go": "package p\n\n//inbox:evnt type=a version=1 consumers=b\n" + struct1},
			want:  []string{"e.go:3:1", "unknown directive //inbox:evnt"},
		},
		{
			name:  "two directives on one type",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\n//inbox:event type=a version=2 consumers=b\n" + struct1},
			want:  []string{"e.go:4:1", "type A already has an //inbox:event directive at line 3"},
		},
		{
			name:  "consumers with the same Go name",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=orders.v1,orders-v1\n" + struct1},
			want:  []string{"e.go:3:1", `consumers "orders-v1" and "orders.v1" both become the Go name OrdersV1`},
		},
		{
			name:  "package declares a generated name",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\n" + struct1 + "\nfunc AcceptA() {}\n\ntype Delivery struct{}\n"},
			want: []string{
				`e.go:6:6: AcceptA is also a name inboxgen generates (event a v1 at`,
				"e.go:8:6: Delivery is also a name inboxgen generates (generated for every package)",
			},
		},
		{
			name:  "package declares an import name",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\n" + struct1 + "\nvar inbox = 1\n"},
			want:  []string{"e.go:6:5: inbox is also a name inboxgen generates (an import of the generated file)"},
		},
		{
			name:  "generated names collide",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=order.created\ntype OrderCreated struct{}\n"},
			want:  []string{"e.go:3:1", "generated name OrderCreatedConsumer (event a v1) collides with consumer \"order.created\""},
		},
		{
			name:  "outbox unknown key",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d colour=red\n" + struct1},
			want:  []string{"e.go:3:1", `//outbox:event: unknown key "colour"`, "known keys: type, version, source, destination"},
		},
		{
			name:  "outbox missing source and destination",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1\n" + struct1},
			want:  []string{"e.go:3:1: //outbox:event on A: missing source", "e.go:3:1: //outbox:event on A: missing destination"},
		},
		{
			name:  "outbox bad destination",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=\"a\\tb\"\n" + struct1},
			want:  []string{"e.go:3:1", `//outbox:event: destination "a\tb": control character U+0009 at byte 1`},
		},
		{
			name:  "outbox version zero",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=0 source=s destination=d\n" + struct1},
			want:  []string{"e.go:3:1", `//outbox:event: version must be an integer between 1 and 2147483647, got "0"`},
		},
		{
			name:  "inbox and outbox disagree",
			files: map[string]string{"e.go": "package p\n\n//inbox:event type=a version=1 consumers=b\n//outbox:event type=a version=2 source=s destination=d\n" + struct1},
			want:  []string{"e.go:4:1", "type A is a v1 for the inbox (line 3) but a v2 for the outbox"},
		},
		{
			name: "outbox type and version emitted twice",
			files: map[string]string{
				"a.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d\n" + struct1,
				"b.go": "package p\n\n//outbox:event type=a version=1 source=s destination=e\ntype B struct{}\n",
			},
			want: []string{"b.go:3:1", "a v1 is already emitted by A at", "a.go:3:1"},
		},
		{
			name:  "two outbox directives on one type",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d\n//outbox:event type=a version=2 source=s destination=d\n" + struct1},
			want:  []string{"e.go:4:1", "type A already has an //outbox:event directive at line 3"},
		},
		{
			name:  "outbox directive not on a type",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d\nfunc F() {}\n"},
			want:  []string{"e.go:3:1", "//outbox:event must be in the doc comment of a package-level type declaration"},
		},
		{
			name:  "outbox non-struct target",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d\ntype A []string\n"},
			want:  []string{"e.go:4:6", "A is not a struct type"},
		},
		{
			name:  "unknown outbox directive",
			files: map[string]string{"e.go": "package p\n\n//outbox:evnt type=a\n" + struct1},
			want:  []string{"e.go:3:1", "unknown directive //outbox:evnt (want //inbox:event or //outbox:event)"},
		},
		{
			name:  "package declares an emit name",
			files: map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d\n" + struct1 + "\nfunc EmitA() {}\n\nvar outbox = 1\n"},
			want: []string{
				"e.go:6:6: EmitA is also a name inboxgen generates (outbox event a v1 at",
				"e.go:8:5: outbox is also a name inboxgen generates (an import of the generated file)",
			},
		},
		{
			name:  "no declarations",
			files: map[string]string{"e.go": "package p\n\ntype A struct{}\n"},
			want:  []string{"no //inbox:event or //outbox:event declarations in package p"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, _, err := gen.Generate(gen.Config{Dir: dir})
			if err == nil {
				t.Fatal("Generate succeeded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			var list gen.Errors
			if !errors.As(err, &list) {
				t.Errorf("error is %T, want gen.Errors", err)
			}
		})
	}
}

// Every problem is reported in one run, in file order.
func TestErrorsAreCollected(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"e.go": "package p\n\n//inbox:event type=a consumers=b\ntype A struct{}\n\n//inbox:event version=1 consumers=b\ntype B struct{}\n"})
	_, _, err := gen.Generate(gen.Config{Dir: dir})
	var list gen.Errors
	is.True(errors.As(err, &list))
	is.Equal(len(list), 2)
	is.Equal(list[0].Pos.Line, 3)
	is.Equal(list[1].Pos.Line, 6)
}

func TestQueriesWithoutNew(t *testing.T) {
	is := is.New(t)
	dir := filepath.Join(fixtures, "errqueries")
	_, _, err := gen.Generate(gen.Config{Dir: dir, Queries: "github.com/pginbox/pginbox/testdata/gen/errqueries/notsqlc"})
	is.True(err != nil)
	// Without $GOFILE/$GOLINE the error points at the //go:generate line.
	is.True(strings.Contains(err.Error(), filepath.Join(dir, "events.go")+":3: "))
	is.True(strings.Contains(err.Error(), "package notsqlc has no `func New(db DBTX) *Queries`"))

	_, _, err = gen.Generate(gen.Config{Dir: dir, Queries: "github.com/pginbox/pginbox/testdata/gen/errqueries/notsqlc", Origin: "events.go:3"})
	is.True(strings.HasPrefix(err.Error(), "events.go:3: -queries "))
}

// A -queries package whose DBTX a pgx.Tx does not satisfy would make
// inbox_gen.go fail to compile; inboxgen says which sqlc setting fixes it.
func TestQueriesNotForPgx(t *testing.T) {
	cases := []struct {
		pkg  string
		want string
	}{
		{"stdsql", "package stdsql was generated for database/sql (its DBTX has ExecContext and QueryContext, not pgx's Exec and Query)"},
		{"pgxv4", "package pgxv4 was generated for pgx/v4 (the file declaring DBTX imports github.com/jackc/pgx/v4)"},
		{"fewmethods", "package fewmethods is not sqlc's pgx/v5 output (its DBTX lacks Query, QueryRow)"},
		{"nodbtx", "package nodbtx declares New(Conn), but Conn is not sqlc's DBTX interface"},
	}
	for _, tc := range cases {
		t.Run(tc.pkg, func(t *testing.T) {
			t.Parallel()
			path := "github.com/pginbox/pginbox/testdata/gen/errqueries/" + tc.pkg
			_, _, err := gen.Generate(gen.Config{Dir: filepath.Join(fixtures, "errqueries"), Queries: path, Origin: "events.go:3"})
			if err == nil {
				t.Fatal("Generate succeeded; want an error")
			}
			want := "events.go:3: -queries " + path + ": " + tc.want + "; handlers get the message's pgx.Tx, so set `sql_package: pgx/v5` in sqlc.yaml and run sqlc generate again"
			if err.Error() != want {
				t.Errorf("error:\n%v\nwant:\n%s", err, want)
			}
		})
	}
}

func TestQueriesNotFound(t *testing.T) {
	is := is.New(t)
	_, _, err := gen.Generate(gen.Config{Dir: filepath.Join(fixtures, "errqueries"), Queries: "github.com/pginbox/pginbox/testdata/gen/nosuchpackage"})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "events.go:3: -queries github.com/pginbox/pginbox/testdata/gen/nosuchpackage: "))
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A package that only emits gets no inbox side: the inbox names stay free.
func TestOutboxOnlyPackageHasNoInboxSide(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"e.go": "package p\n\n//outbox:event type=a version=1 source=s destination=d\ntype A struct{}\n\ntype Delivery struct{}\n\nvar inbox = 1\n"})
	_, src, err := gen.Generate(gen.Config{Dir: dir})
	is.NoErr(err)
	is.True(!strings.Contains(string(src), "pginbox/inbox"))
	is.True(strings.Contains(string(src), "func EmitA(ctx context.Context, tx outbox.Tx, p A) (outbox.ID, error)"))
}
