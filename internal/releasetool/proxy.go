package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// buildProxy writes a file-based module proxy (GOPROXY=file://out) serving
// every module of the repository at root at version: for each, the layout
// the go command reads, <escaped path>/@v/{list, VERSION.info, VERSION.mod,
// VERSION.zip}. The zips are made by golang.org/x/mod/zip from the module's
// directory, with the files and exclusions of a real module zip (nested
// modules, vendor directories); the tree should hold only what git would, as
// a proxy builds its zips from the tagged commit.
func buildProxy(root string, mods []*repoModule, version, out string, at time.Time) error {
	for _, m := range mods {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, at.UTC().Truncate(time.Second)})
		if err != nil {
			return err
		}
		files := map[string][]byte{
			"list":            []byte(version + "\n"),
			version + ".info": info,
			version + ".mod":  m.Raw,
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return err
			}
		}
		if err := writeZip(filepath.Join(dir, version+".zip"), module.Version{Path: m.Path, Version: version}, filepath.Join(root, filepath.FromSlash(m.Dir))); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
	}
	return nil
}

func writeZip(name string, mv module.Version, dir string) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return modzip.CreateFromDir(f, mv, dir)
}
