package doccheck

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// WrapperDir holds the fragments' wrappers, relative to the repository root.
const WrapperDir = "internal/doccheck/testdata/wrappers"

// blockMark is the line of a wrapper that a fragment replaces.
const blockMark = "//doc:block"

// Source is the Go file a block is compiled as: the block itself, or its
// wrapper with the block in place of the //doc:block line. Offset is the
// file's line number of the block's first line, minus one.
func Source(root string, b Block) (src string, offset int, err error) {
	switch {
	case b.Is("doc", "program"), b.Is("doc", "file"):
		return b.Body, 0, nil
	case b.Is("doc", "fragment"):
		name := b.Marker.Arg(1)
		w, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(WrapperDir), name+".go"))
		if err != nil {
			return "", 0, fmt.Errorf("%s: the fragment's wrapper: %w", b.Where(), err)
		}
		lines := strings.SplitAfter(string(w), "\n")
		for i, l := range lines {
			if strings.TrimSpace(l) == blockMark {
				return strings.Join(lines[:i], "") + b.Body + strings.Join(lines[i+1:], ""), i, nil
			}
		}
		return "", 0, fmt.Errorf("%s: wrapper %s.go has no %s line", b.Where(), name, blockMark)
	}
	return "", 0, fmt.Errorf("%s: not a compiled block (marker %q %v)", b.Where(), b.Marker.Kind, b.Marker.Args)
}

// Module is a Go module of the repository: its directory relative to the
// root ("." for the root module) and its path.
type Module struct {
	Dir, Path string // relative to the root, and the module path
}

// Modules returns the root module and every nested one outside testdata.
func Modules(root string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for l := range strings.Lines(string(data)) {
			if path, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
				dir, _ := filepath.Rel(root, filepath.Dir(p))
				mods = append(mods, Module{Dir: filepath.ToSlash(dir), Path: strings.TrimSpace(path)})
				break
			}
		}
		return nil
	})
	return mods, err
}

// moduleFor picks the module a source compiles in: the nested module whose
// path is the longest prefix of one of its imports, else the root module.
func moduleFor(mods []Module, src string) (Module, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "block.go", src, parser.ImportsOnly)
	if err != nil {
		return Module{}, err
	}
	best := Module{}
	for _, m := range mods {
		if m.Dir == "." {
			if best.Path == "" {
				best = m
			}
			continue
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && len(m.Path) > len(best.Path) {
				best = m
			}
		}
	}
	return best, nil
}

// Problem is a compile error, placed in the Markdown file where it can be.
type Problem struct {
	Block Block  // the block that does not compile
	Line  int    // the Markdown line, or 0 when the error is in the wrapper
	Text  string // the compiler's message
}

func (p Problem) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: in its wrapper: %s", p.Block.Where(), p.Text)
	}
	return fmt.Sprintf("%s:%d: %s", p.Block.File, p.Line, p.Text)
}

// Build compiles the blocks, each as a package of its own in the module its
// imports need, without writing into the repository: the go command's
// -overlay places each file in a directory that does not exist on disk. The
// executables of program blocks are written to binDir, named by Build's
// result. Compile errors come back as problems at their Markdown lines; err
// is for failures of the go command itself.
func Build(ctx context.Context, root string, blocks []Block, binDir string) (bins map[int]string, problems []Problem, err error) {
	mods, err := Modules(root)
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "doccheck-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)

	type unit struct {
		i      int // index into blocks
		file   string
		offset int
	}
	byModule := map[Module][]unit{}
	overlay := map[Module]map[string]string{}
	bins = map[int]string{}
	for i, b := range blocks {
		src, offset, err := Source(root, b)
		if err != nil {
			return nil, nil, err
		}
		m, err := moduleFor(mods, src)
		if err != nil {
			problems = append(problems, Problem{Block: b, Line: b.Line + 1, Text: "does not parse: " + err.Error()})
			continue
		}
		name := fmt.Sprintf("b%03d", i)
		file := filepath.Join(tmp, name+".go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			return nil, nil, err
		}
		if overlay[m] == nil {
			overlay[m] = map[string]string{}
		}
		pkgDir := filepath.Join(root, filepath.FromSlash(m.Dir), "zz_doccheck", name)
		overlay[m][filepath.Join(pkgDir, "block.go")] = file
		byModule[m] = append(byModule[m], unit{i, file, offset})
		if b.Is("doc", "program") {
			bins[i] = filepath.Join(binDir, name)
		}
	}
	for m, units := range byModule {
		ov, err := json.Marshal(map[string]any{"Replace": overlay[m]})
		if err != nil {
			return nil, nil, err
		}
		ovFile := filepath.Join(tmp, "overlay-"+strings.ReplaceAll(m.Dir, "/", "_")+".json")
		if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
			return nil, nil, err
		}
		// All packages first, without -o: with -o naming a directory, the go
		// command builds the main packages alone.
		var pkgs, mains []string
		for _, u := range units {
			pkg := "./zz_doccheck/" + strings.TrimSuffix(filepath.Base(u.file), ".go")
			pkgs = append(pkgs, pkg)
			if _, ok := bins[u.i]; ok {
				mains = append(mains, pkg)
			}
		}
		dir := filepath.Join(root, filepath.FromSlash(m.Dir))
		out, runErr := goCommand(ctx, dir, append([]string{"build", "-overlay=" + ovFile}, pkgs...)...)
		if runErr == nil && len(mains) > 0 {
			args := append([]string{"build", "-overlay=" + ovFile, "-o", binDir + string(filepath.Separator)}, mains...)
			if out, err := goCommand(ctx, dir, args...); err != nil {
				return nil, nil, fmt.Errorf("go build -o in %s: %v\n%s", m.Dir, err, out)
			}
		}
		if runErr == nil {
			continue
		}
		found := false
		byFile := map[string]unit{}
		for _, u := range units {
			byFile[filepath.Clean(u.file)] = u
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			mm := errLine.FindStringSubmatch(sc.Text())
			if mm == nil {
				continue
			}
			// The go command names a file relative to dir when that is
			// shorter (a checkout next to the temporary directory).
			f := mm[1]
			if !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			u, ok := byFile[filepath.Clean(f)]
			if !ok {
				continue
			}
			found = true
			n, _ := strconv.Atoi(mm[2])
			b := blocks[u.i]
			p := Problem{Block: b, Text: mm[4]}
			if k := n - u.offset; k >= 1 && k <= strings.Count(b.Body, "\n") {
				p.Line = b.Line + k
			} else {
				p.Text = fmt.Sprintf("line %d: %s", n, mm[4])
			}
			problems = append(problems, p)
		}
		if !found {
			return nil, nil, fmt.Errorf("go build in %s: %v\n%s", m.Dir, runErr, out)
		}
	}
	sort.SliceStable(problems, func(a, b int) bool { return problems[a].String() < problems[b].String() })
	return bins, problems, nil
}

func goCommand(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// errLine is a compiler message: file:line:col: text.
var errLine = regexp.MustCompile(`^(\S+\.go):(\d+):(\d+): (.*)$`)
