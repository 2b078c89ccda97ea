package doccheck

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func allBlocks(t *testing.T) (string, []Block) {
	t.Helper()
	root := repoRoot(t)
	blocks, err := ParseAll(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, blocks
}

// TestEveryGoBlockIsChecked: a Go block without a marker would be read by
// nobody, so it is an error; so are markers in the wrong place.
func TestEveryGoBlockIsChecked(t *testing.T) {
	t.Parallel()
	_, blocks := allBlocks(t)
	compiled := 0
	for i, b := range blocks {
		switch {
		case b.Marker.Kind == "scratch" && b.File != Walkthrough:
			t.Errorf("%s: scratch blocks belong to %s, the file internal/scratchtest builds", b.Where(), Walkthrough)
		case b.Is("doc", "output"):
			if i == 0 || !blocks[i-1].Is("doc", "program") || blocks[i-1].File != b.File {
				t.Errorf("%s: <!-- doc: output --> must follow a <!-- doc: program --> block", b.Where())
			}
		case b.Lang != "go":
		case b.Is("scratch", "file"), b.Is("doc", "program"), b.Is("doc", "file"), b.Is("doc", "fragment"), b.Is("doc", "excerpt"):
			compiled++
		default:
			t.Errorf("%s: a Go block without a marker that checks it; see internal/doccheck", b.Where())
		}
	}
	if compiled < 20 {
		t.Errorf("found %d checked Go blocks; the guides hold more than that", compiled)
	}
}

// TestGoBlocksCompile compiles every program, file and fragment block, and
// runs each program on an empty database: it must exit 0 and print what the
// output block after it shows.
func TestGoBlocksCompile(t *testing.T) {
	t.Parallel()
	root, all := allBlocks(t)
	var blocks []Block
	outputs := map[int]Block{} // index into blocks -> its output block
	for i, b := range all {
		if b.Is("doc", "program") || b.Is("doc", "file") || b.Is("doc", "fragment") {
			if i+1 < len(all) && all[i+1].Is("doc", "output") {
				outputs[len(blocks)] = all[i+1]
			}
			blocks = append(blocks, b)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	bins, problems, err := Build(ctx, root, blocks, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("does not compile: %s", p)
	}
	if t.Failed() {
		return
	}
	programs := 0
	for i, bin := range bins {
		programs++
		b := blocks[i]
		t.Run(strings.ReplaceAll(b.Where(), "/", "_"), func(t *testing.T) {
			t.Parallel()
			runCtx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(runCtx, bin)
			cmd.Env = append(os.Environ(), "DATABASE_URL="+inboxtest.EmptyDatabase(t))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: the program failed (%v):\n%s%s", b.Where(), err, stdout.String(), stderr.String())
			}
			if out, ok := outputs[i]; ok && stdout.String() != out.Body {
				t.Errorf("%s: the program printed\n%s\nbut %s shows\n%s", b.Where(), stdout.String(), out.Where(), out.Body)
			}
		})
	}
	if programs == 0 {
		t.Error("no <!-- doc: program --> block: README.md's first handler should be one")
	}
}

// TestExcerptsMatch: an excerpt shows code the build compiles, so it must
// still be in its file.
func TestExcerptsMatch(t *testing.T) {
	t.Parallel()
	root, blocks := allBlocks(t)
	for _, b := range blocks {
		if !b.Is("doc", "excerpt") {
			continue
		}
		path := b.Marker.Arg(1)
		file, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("%s: %v", b.Where(), err)
			continue
		}
		if missing, ok := MatchExcerpt(b.Body, string(file)); !ok {
			t.Errorf("%s: not an excerpt of %s any more: %q is not where the block has it", b.Where(), path, missing)
		}
	}
}

// TestShellCommands checks what the shell blocks name: make targets exist,
// the packages go commands build or run exist, and so do the directories cd
// enters. (The inbox commands and their flags are checked in cmd/inbox.)
func TestShellCommands(t *testing.T) {
	t.Parallel()
	root, blocks := allBlocks(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, b := range blocks {
		if !slices.Contains(ShellLangs, b.Lang) {
			continue
		}
		cmds, err := Commands(b)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range cmds {
			dir := filepath.Join(root, filepath.FromSlash(c.Dir))
			switch w := c.Words; {
			case w[0] == "make":
				for _, target := range w[1:] {
					if strings.HasPrefix(target, "-") || strings.Contains(target, "=") {
						continue
					}
					checked++
					if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
						t.Errorf("%s: the Makefile has no target %q", c.Where(), target)
					}
				}
			case w[0] == "cd" && len(w) == 2 && !strings.ContainsAny(w[1], "$~"):
				checked++
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					t.Errorf("%s: cd %s: no such directory in the repository", c.Where(), w[1])
				}
			case w[0] == "go" && len(w) > 1 && slices.Contains([]string{"run", "test", "build", "install", "vet", "generate"}, w[1]):
				for _, arg := range w[2:] {
					if arg != "." && !strings.HasPrefix(arg, "./") {
						continue
					}
					checked++
					pkg := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/")))
					if goFiles, _ := filepath.Glob(filepath.Join(pkg, "*.go")); len(goFiles) == 0 && !strings.HasSuffix(arg, "...") {
						t.Errorf("%s: go %s %s: no Go package at %s", c.Where(), w[1], arg, pkg)
					} else if fi, err := os.Stat(pkg); err != nil || !fi.IsDir() {
						t.Errorf("%s: go %s %s: no such directory", c.Where(), w[1], arg)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d make targets, packages and directories in the shell blocks; expected more", checked)
	}
}

// TestReadmeLinksEveryGuide: every guide is one click from the README.
func TestReadmeLinksEveryGuide(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f != "README.md" && !bytes.Contains(readme, []byte("]("+f+")")) && !bytes.Contains(readme, []byte("]("+f+"#")) {
			t.Errorf("README.md does not link %s", f)
		}
	}
}
