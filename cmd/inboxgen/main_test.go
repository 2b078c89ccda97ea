package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../testdata/gen/basic/events.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "events.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"-dir", dir, "-out", "events_gen.go"}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(dir, "events_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../testdata/gen/basic/inbox_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("output differs from testdata/gen/basic/inbox_gen.go")
	}
}

func TestRunReportsEveryError(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\n//inbox:event type=a consumers=b\ntype A struct{}\n\n//inbox:event type=b version=1 consumers=b\ntype B int\n"
	if err := os.WriteFile(filepath.Join(dir, "e.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"-dir", dir}, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "e.go:3:1: ") || !strings.Contains(lines[1], "e.go:7:6: B is not a struct type") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox_gen.go")); !os.IsNotExist(err) {
		t.Error("a failed run wrote output")
	}
}

// Under go generate, errors about the flags point at the //go:generate line.
func TestRunOriginFromGoGenerate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "e.go"), []byte("package p\n\n//inbox:event type=a version=1 consumers=b\ntype A struct{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFILE", "e.go")
	t.Setenv("GOLINE", "7")
	var stderr bytes.Buffer
	if code := run([]string{"-dir", dir, "-queries", "example.com/nope"}, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.HasPrefix(stderr.String(), "e.go:7: -queries example.com/nope: ") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestRunFlags(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-out", "sub/x.go"}, &stderr); code != 2 {
		t.Errorf("-out with a path: exit %d, want 2", code)
	}
	if code := run([]string{"extra"}, &stderr); code != 2 {
		t.Errorf("positional argument: exit %d, want 2", code)
	}
}

// A -queries package sqlc generated for database/sql fails the run with the
// setting that fixes it, before any code is written.
func TestRunRefusesDatabaseSQLQueries(t *testing.T) {
	const dir = "../../testdata/gen/errqueries"
	t.Setenv("GOFILE", "events.go")
	t.Setenv("GOLINE", "3")
	var stderr bytes.Buffer
	if code := run([]string{"-dir", dir, "-queries", "github.com/pginbox/pginbox/testdata/gen/errqueries/stdsql"}, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	for _, want := range []string{"events.go:3: -queries ", "generated for database/sql", "set `sql_package: pgx/v5` in sqlc.yaml"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not mention %q:\n%s", want, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox_gen.go")); !os.IsNotExist(err) {
		t.Error("a failed run wrote output")
	}
}
