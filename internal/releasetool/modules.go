package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// A repoModule is one module of the repository: the root module or a nested
// one (a directory with its own go.mod).
type repoModule struct {
	Dir  string // slash-separated, relative to the repository root; "." for the root module
	Path string // the module path
	File *modfile.File
	Raw  []byte   // go.mod as read
	Deps []string // module paths of the repository's modules it requires
}

// TagPrefix is what the module's tags start with: "" for the root module,
// "transport/rabbitmq/" for a nested one (the layout the go command expects
// of a module in a subdirectory).
func (m *repoModule) TagPrefix() string {
	if m.Dir == "." {
		return ""
	}
	return m.Dir + "/"
}

// modFiles lists the go.mod files of the repository at root, relative and
// slash-separated: those git tracks or would track (like scripts/each-module),
// or, outside a git work tree (a scratch copy), every go.mod below root.
// Anything under a testdata directory is a test's input, not a module.
func modFiles(root string) ([]string, error) {
	var files []string
	cmd := exec.Command("git", "ls-files", "-co", "--exclude-standard", "--", "*go.mod")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-files in %s: %v: %s", root, err, stderr.Bytes())
		}
		files = strings.Fields(string(out))
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && d.Name() == "go.mod" {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var kept []string
	for _, f := range files {
		if path.Base(f) != "go.mod" || slices.Contains(strings.Split(f, "/"), "testdata") {
			continue
		}
		kept = append(kept, f)
	}
	sort.Strings(kept)
	return kept, nil
}

// loadModules reads every module of the repository at root and returns them
// in dependency order: a module comes after every repository module it
// requires, ties broken by directory. The order is derived from the go.mod
// files alone, so a new nested module, or a new requirement between two of
// them, needs no change here.
func loadModules(root string) ([]*repoModule, error) {
	files, err := modFiles(root)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*repoModule{}
	var mods []*repoModule
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, raw, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s: no module directive", f)
		}
		m := &repoModule{Dir: path.Dir(f), Path: mf.Module.Mod.Path, File: mf, Raw: raw}
		if prev, ok := byPath[m.Path]; ok {
			return nil, fmt.Errorf("%s and %s/go.mod both declare module %s", f, prev.Dir, m.Path)
		}
		byPath[m.Path] = m
		mods = append(mods, m)
	}
	root0, ok := rootModule(mods)
	if !ok {
		return nil, fmt.Errorf("%s: no go.mod at the repository root", root)
	}
	for _, m := range mods {
		if m != root0 && m.Path != root0.Path+"/"+m.Dir {
			return nil, fmt.Errorf("%s/go.mod: module %s, want %s/%s: the go command finds a nested module's tags (%sVERSION) only when its path is the root module's path plus its directory",
				m.Dir, m.Path, root0.Path, m.Dir, m.TagPrefix())
		}
		for _, r := range m.File.Require {
			if _, ok := byPath[r.Mod.Path]; ok && !slices.Contains(m.Deps, r.Mod.Path) {
				m.Deps = append(m.Deps, r.Mod.Path)
			}
		}
	}
	return order(mods)
}

func rootModule(mods []*repoModule) (*repoModule, bool) {
	for _, m := range mods {
		if m.Dir == "." {
			return m, true
		}
	}
	return nil, false
}

// order sorts mods topologically (Kahn's algorithm), taking the module with
// the smallest directory among those whose dependencies are all placed.
func order(mods []*repoModule) ([]*repoModule, error) {
	placed := map[string]bool{}
	var out []*repoModule
	for len(out) < len(mods) {
		var next *repoModule
		for _, m := range mods {
			if placed[m.Path] {
				continue
			}
			ready := true
			for _, d := range m.Deps {
				ready = ready && placed[d]
			}
			if ready && (next == nil || m.Dir < next.Dir) {
				next = m
			}
		}
		if next == nil {
			var left []string
			for _, m := range mods {
				if !placed[m.Path] {
					left = append(left, m.Dir)
				}
			}
			return nil, fmt.Errorf("the modules in %s require each other in a cycle: no release order exists", strings.Join(left, ", "))
		}
		placed[next.Path] = true
		out = append(out, next)
	}
	return out, nil
}
