package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// workHeader opens a go.work written from scratch.
const workHeader = `// Local development: every module of the repository, each building against
// the others in this checkout. The go command reads this file only inside the
// checkout; ` + "`go get`" + ` and module consumers never see it. The replace lines make
// the version the nested go.mod files require (the one being prepared, which
// no proxy has yet) resolve to its directory here. scripts/release keeps this
// file in step with the go.mod files (RELEASING.md).
`

// preparedVersion is the version the repository's modules require of each
// other: the release being prepared. Every such requirement must name the same
// version. ok is false when no module requires another.
func preparedVersion(mods []*repoModule) (version string, ok bool, err error) {
	inRepo := modulePaths(mods)
	var where []string
	for _, m := range mods {
		for _, r := range m.File.Require {
			if !inRepo[r.Mod.Path] {
				continue
			}
			if version != "" && r.Mod.Version != version {
				return "", false, fmt.Errorf("%s/go.mod requires %s %s, but %s requires %s: the repository's modules require one version of each other (run scripts/release --write VERSION)",
					m.Dir, r.Mod.Path, r.Mod.Version, where[0], version)
			}
			version = r.Mod.Version
			where = append(where, m.Dir+"/go.mod")
		}
	}
	return version, version != "", nil
}

// foreignReplaces refuses a replace directive of another module than the
// repository's own (those, layout drops): a module that depends on pginbox
// builds without it, and `go install pkg@version` refuses a module that has
// one.
func foreignReplaces(mods []*repoModule) error {
	inRepo := modulePaths(mods)
	var found []string
	for _, m := range mods {
		for _, r := range m.File.Replace {
			if !inRepo[r.Old.Path] {
				found = append(found, fmt.Sprintf("%s/go.mod replaces %s", m.Dir, r.Old.Path))
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%s: a module importing pginbox builds without a replace (and go install refuses one); require a released version instead", strings.Join(found, "; "))
	}
	return nil
}

func modulePaths(mods []*repoModule) map[string]bool {
	paths := map[string]bool{}
	for _, m := range mods {
		paths[m.Path] = true
	}
	return paths
}

// checkVersion refuses what the release scheme cannot tag: anything but a
// canonical vMAJOR.MINOR.PATCH (a pre-release suffix allowed), and major
// versions from 2, which need a /vN suffix on every module path.
func checkVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH, e.g. v0.1.0", v)
	}
	if m := semver.Major(v); m != "v0" && m != "v1" {
		return fmt.Errorf("version %s: a major version from v2 needs the /%s suffix on every module path first", v, m)
	}
	return nil
}

// layout computes the files that setting version would change: every go.mod
// requiring the repository's modules at version, with no replace of them, and
// go.work using every module and replacing each required one, at version, by
// its directory. It returns the new contents by path relative to root.
func layout(root string, mods []*repoModule, version string) (map[string][]byte, error) {
	inRepo := modulePaths(mods)
	dirOf := map[string]string{}
	for _, m := range mods {
		dirOf[m.Path] = m.Dir
	}
	changed := map[string][]byte{}
	required := map[string]bool{}
	for _, m := range mods {
		edited := false
		for _, r := range slices.Clone(m.File.Require) {
			if !inRepo[r.Mod.Path] {
				continue
			}
			required[r.Mod.Path] = true
			if r.Mod.Version != version {
				if err := m.File.AddRequire(r.Mod.Path, version); err != nil {
					return nil, err
				}
				edited = true
			}
		}
		for _, r := range slices.Clone(m.File.Replace) {
			if inRepo[r.Old.Path] {
				if err := m.File.DropReplace(r.Old.Path, r.Old.Version); err != nil {
					return nil, err
				}
				edited = true
			}
		}
		if edited {
			m.File.Cleanup()
			out, err := m.File.Format()
			if err != nil {
				return nil, err
			}
			changed[filepath.ToSlash(filepath.Join(m.Dir, "go.mod"))] = out
		}
	}

	root0, _ := rootModule(mods)
	var wantUse, wantRepl []string
	for _, m := range mods {
		wantUse = append(wantUse, workDir(m.Dir))
	}
	for p := range required {
		wantRepl = append(wantRepl, p+" "+version+" => "+workDir(dirOf[p]))
	}
	sort.Strings(wantUse)
	sort.Strings(wantRepl)
	goVersion := root0.File.Go.Version

	raw, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err == nil {
		wf, err := modfile.ParseWork("go.work", raw, nil)
		if err != nil {
			return nil, err
		}
		var haveUse, haveRepl []string
		for _, u := range wf.Use {
			haveUse = append(haveUse, u.Path)
		}
		for _, r := range wf.Replace {
			haveRepl = append(haveRepl, r.Old.Path+" "+r.Old.Version+" => "+r.New.Path)
		}
		sort.Strings(haveUse)
		sort.Strings(haveRepl)
		if slices.Equal(wantUse, haveUse) && slices.Equal(wantRepl, haveRepl) && wf.Go != nil && wf.Go.Version == goVersion {
			return changed, nil
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	changed["go.work"] = workFile(goVersion, wantUse, wantRepl)
	return changed, nil
}

// workFile writes go.work whole: the tool owns it, and the check compares
// what it says, not how.
func workFile(goVersion string, use, repl []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\ngo %s\n\nuse (\n", workHeader, goVersion)
	for _, u := range use {
		fmt.Fprintf(&b, "\t%s\n", u)
	}
	b.WriteString(")\n")
	if len(repl) > 0 {
		b.WriteString("\nreplace (\n")
		for _, r := range repl {
			fmt.Fprintf(&b, "\t%s\n", r)
		}
		b.WriteString(")\n")
	}
	return b.Bytes()
}

// workDir is how go.work names a module's directory.
func workDir(dir string) string {
	if dir == "." {
		return "."
	}
	return "./" + dir
}

// diffSummary says in one line per file what layout would change.
func diffSummary(root string, changed map[string][]byte) string {
	var files []string
	for f := range changed {
		files = append(files, f)
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		old, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		fmt.Fprintf(&b, "--- %s\n%s", f, lineDiff(old, changed[f]))
	}
	return b.String()
}

// lineDiff lists the lines only in a (-) and only in b (+): enough to read
// what a go.mod or go.work edit does.
func lineDiff(a, b []byte) string {
	count := func(x []byte) map[string]int {
		n := map[string]int{}
		for _, l := range strings.Split(string(x), "\n") {
			n[l]++
		}
		return n
	}
	ca, cb := count(a), count(b)
	var out bytes.Buffer
	for _, l := range strings.Split(string(a), "\n") {
		if cb[l] == 0 {
			fmt.Fprintf(&out, "-%s\n", l)
		} else {
			cb[l]--
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if ca[l] == 0 {
			fmt.Fprintf(&out, "+%s\n", l)
		} else {
			ca[l]--
		}
	}
	return out.String()
}
