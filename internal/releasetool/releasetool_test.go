package main

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path: content) below a new directory, outside git:
// the tool walks it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// toyTree is a root module and three nested ones: b requires the root and
// a/c; a/c requires the root; d requires nothing. It starts with replace
// directives, as the repository did before go.work.
func toyTree(t *testing.T) string {
	return writeTree(t, map[string]string{
		"go.mod":  "module example.com/r\n\ngo 1.26.0\n",
		"LICENSE": "the toy's license\n",
		"r.go":    "// Package r is the root.\npackage r\n\n// X is one.\nconst X = 1\n",
		"b/go.mod": "module example.com/r/b\n\ngo 1.26.0\n\nrequire (\n\texample.com/r v0.0.0\n\texample.com/r/a/c v0.0.0\n)\n\n" +
			"replace (\n\texample.com/r => ../\n\texample.com/r/a/c => ../a/c\n)\n",
		"b/b.go":                 "package b\n\nimport (\n\t\"example.com/r\"\n\t\"example.com/r/a/c\"\n)\n\nconst Y = r.X + c.Z\n",
		"a/c/go.mod":             "module example.com/r/a/c\n\ngo 1.26.0\n\nrequire example.com/r v0.0.0\n\nreplace example.com/r => ../..\n",
		"a/c/c.go":               "package c\n\nimport \"example.com/r\"\n\nconst Z = r.X\n",
		"d/go.mod":               "module example.com/r/d\n\ngo 1.26.0\n",
		"d/d.go":                 "package d\n",
		"testdata/x/go.mod":      "module example.com/ignored\n",
		"b/testdata/y/go.mod":    "module example.com/ignored2\n",
		"b/cmd/tool/main.go":     "package main\n\nimport \"example.com/r/b\"\n\nfunc main() { println(b.Y) }\n",
		"a/c/internal/i/i.go":    "package i\n",
		"b/vendor/x/ignored.txt": "a module zip leaves vendored packages out\n",
	})
}

func TestOrderFollowsRequirements(t *testing.T) {
	mods, err := loadModules(toyTree(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mods {
		got = append(got, m.Dir)
	}
	// a/c before b (b requires it); the root first; ties by directory.
	if want := ". a/c b d"; strings.Join(got, " ") != want {
		t.Fatalf("order %q, want %q", strings.Join(got, " "), want)
	}
}

func TestOrderRefusesCycle(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":   "module example.com/r\n\ngo 1.26.0\n",
		"x/go.mod": "module example.com/r/x\n\ngo 1.26.0\n\nrequire example.com/r/y v0.1.0\n",
		"y/go.mod": "module example.com/r/y\n\ngo 1.26.0\n\nrequire example.com/r/x v0.1.0\n",
	})
	if _, err := loadModules(root); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("err = %v, want a cycle", err)
	}
}

func TestNestedPathMustMatchDirectory(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":   "module example.com/r\n\ngo 1.26.0\n",
		"x/go.mod": "module example.com/r/elsewhere\n\ngo 1.26.0\n",
	})
	if _, err := loadModules(root); err == nil || !strings.Contains(err.Error(), "want example.com/r/x") {
		t.Fatalf("err = %v, want a path mismatch", err)
	}
}

func TestSetThenCheck(t *testing.T) {
	root := toyTree(t)
	var out bytes.Buffer
	if err := run([]string{"-C", root, "check"}, &out); err == nil {
		t.Fatal("check passed on go.mod files with replace directives and no go.work")
	}
	if err := run([]string{"-C", root, "set", "v0.3.0"}, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run([]string{"-C", root, "check"}, &out); err != nil {
		t.Fatalf("check after set: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "b", "go.mod"))
	if strings.Contains(string(b), "replace") || strings.Count(string(b), "v0.3.0") != 2 {
		t.Fatalf("b/go.mod after set:\n%s", b)
	}
	w, _ := os.ReadFile(filepath.Join(root, "go.work"))
	for _, want := range []string{"\t.\n", "\t./a/c\n", "\t./b\n", "\t./d\n", "example.com/r v0.3.0 => .\n", "example.com/r/a/c v0.3.0 => ./a/c\n"} {
		if !strings.Contains(string(w), want) {
			t.Errorf("go.work lacks %q:\n%s", want, w)
		}
	}
	if strings.Contains(string(w), "example.com/r/b ") || strings.Contains(string(w), "ignored") {
		t.Errorf("go.work replaces a module nothing requires, or names a testdata module:\n%s", w)
	}
	out.Reset()
	if err := run([]string{"-C", root, "version"}, &out); err != nil || out.String() != "v0.3.0\n" {
		t.Fatalf("version = %q, %v", out.String(), err)
	}
	// A second set changes nothing.
	out.Reset()
	if err := run([]string{"-C", root, "set", "v0.3.0"}, &out); err != nil || out.Len() != 0 {
		t.Fatalf("second set wrote %q (%v)", out.String(), err)
	}
	out.Reset()
	if err := run([]string{"-C", root, "tags", "v0.3.0"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "v0.3.0\na/c/v0.3.0\nb/v0.3.0\nd/v0.3.0\n"; out.String() != want {
		t.Fatalf("tags:\n%s\nwant:\n%s", out.String(), want)
	}
	// A module added later (no go.work entry yet) fails the check.
	if err := os.MkdirAll(filepath.Join(root, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "e", "go.mod"), []byte("module example.com/r/e\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-C", root, "check"}, &out); err == nil || !strings.Contains(err.Error(), "./e") {
		t.Fatalf("check with a module missing from go.work: %v", err)
	}
}

func TestForeignReplaceRefused(t *testing.T) {
	root := toyTree(t)
	var out bytes.Buffer
	if err := run([]string{"-C", root, "set", "v0.3.0"}, &out); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "d", "go.mod")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(b, "\nreplace example.com/other => ../other\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"check"}, {"set", "v0.3.0"}} {
		err := run(append([]string{"-C", root}, cmd...), &out)
		if err == nil || !strings.Contains(err.Error(), "d/go.mod replaces example.com/other") {
			t.Errorf("%s with a replace of another module: %v", cmd[0], err)
		}
	}
}

func TestVersionsMustAgree(t *testing.T) {
	root := toyTree(t)
	var out bytes.Buffer
	if err := run([]string{"-C", root, "set", "v0.3.0"}, &out); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "a", "c", "go.mod")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("v0.3.0"), []byte("v0.2.0"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-C", root, "version"}, &out); err == nil || !strings.Contains(err.Error(), "one version") {
		t.Fatalf("version with v0.2.0 and v0.3.0 required: %v", err)
	}
	for _, bad := range []string{"0.3.0", "v0.3", "v2.0.0", "v0.3.0+meta"} {
		if err := run([]string{"-C", root, "set", bad}, &out); err == nil {
			t.Errorf("set %s accepted", bad)
		}
	}
}

// TestProxyServesGoGet: a consumer module fetches and builds every toy module
// through the proxy alone (GOPROXY=file://..., nothing else reachable), with
// no go.work, no replace and no checksum database, then installs a command at
// the version.
func TestProxyServesGoGet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	root := toyTree(t)
	var out bytes.Buffer
	if err := run([]string{"-C", root, "set", "v0.3.0"}, &out); err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	if err := run([]string{"-C", root, "proxy", "-o", proxy}, &out); err != nil {
		t.Fatal(err)
	}
	// A nested module's zip carries the repository's LICENSE, as the go
	// command's zip of a nested module does; a vendored package stays out.
	zr, err := zip.OpenReader(filepath.Join(proxy, "example.com", "r", "b", "@v", "v0.3.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	zr.Close()
	if got, want := strings.Join(names, " "), "example.com/r/b@v0.3.0/b.go example.com/r/b@v0.3.0/cmd/tool/main.go example.com/r/b@v0.3.0/go.mod example.com/r/b@v0.3.0/LICENSE"; got != want {
		t.Fatalf("b's zip holds %s, want %s", got, want)
	}
	consumer := writeTree(t, map[string]string{
		"go.mod":  "module example.com/consumer\n\ngo 1.26.0\n",
		"main.go": "package main\n\nimport (\n\t\"example.com/r/b\"\n\t_ \"example.com/r/d\"\n)\n\nfunc main() { println(b.Y) }\n",
	})
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw", "GOPROXY=file://"+filepath.ToSlash(proxy),
		"GONOSUMDB=example.com", "GONOPROXY=", "GOPRIVATE=", "GOMODCACHE="+t.TempDir(), "GOBIN="+t.TempDir())
	goCmd := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd(consumer, "get", "example.com/r@v0.3.0", "example.com/r/a/c@v0.3.0", "example.com/r/b@v0.3.0", "example.com/r/d@v0.3.0")
	goCmd(consumer, "build", "./...")
	if got := goCmd(consumer, "list", "-m", "-f", "{{.Path}} {{.Version}} {{.Replace}}", "example.com/r/b"); got != "example.com/r/b v0.3.0 <nil>\n" {
		t.Fatalf("example.com/r/b resolved as %q", got)
	}
	goCmd(t.TempDir(), "install", "example.com/r/b/cmd/tool@v0.3.0")
}
