package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// tidy runs `go mod tidy` in every module, outside the workspace, with the
// repository's other modules replaced by their directories for the run only.
// A plain `go mod tidy` in a nested module looks up the version being
// prepared on the module proxy, which does not have it before the release;
// this way the requirements and go.sum come out as after the release, with
// no go.sum line for a pginbox module and no replace left behind.
func tidy(root string, mods []*repoModule, stdout io.Writer) error {
	for _, m := range mods {
		dir := filepath.Join(root, filepath.FromSlash(m.Dir))
		gomod := filepath.Join(dir, "go.mod")
		f, err := modfile.Parse(gomod, m.Raw, nil)
		if err != nil {
			return err
		}
		var added []string
		for _, o := range mods {
			if o == m || f.Module.Mod.Path == o.Path {
				continue
			}
			rel, err := filepath.Rel(dir, filepath.Join(root, filepath.FromSlash(o.Dir)))
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if !strings.HasPrefix(rel, ".") {
				rel = "./" + rel
			}
			if err := f.AddReplace(o.Path, "", rel, ""); err != nil {
				return err
			}
			added = append(added, o.Path)
		}
		if err := tidyWith(gomod, f, added, m.Raw); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
		fmt.Fprintf(stdout, "tidied %s\n", m.Dir)
	}
	return nil
}

// tidyWith writes f (go.mod with temporary replaces), runs go mod tidy, and
// writes back the result without those replaces; on failure it restores raw.
func tidyWith(gomod string, f *modfile.File, added []string, raw []byte) (err error) {
	defer func() {
		if err != nil {
			_ = os.WriteFile(gomod, raw, 0o644)
		}
	}()
	f.Cleanup()
	tmp, err := f.Format()
	if err != nil {
		return err
	}
	if err := os.WriteFile(gomod, tmp, 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "mod", "tidy")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod tidy: %v\n%s", err, out)
	}
	tidied, err := os.ReadFile(gomod)
	if err != nil {
		return err
	}
	g, err := modfile.Parse(gomod, tidied, nil)
	if err != nil {
		return err
	}
	for _, p := range added {
		if err := g.DropReplace(p, ""); err != nil {
			return err
		}
	}
	g.Cleanup()
	out, err := g.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(gomod, out, 0o644)
}
