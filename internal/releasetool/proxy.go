package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
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
// modules, vendor directories), and, like the go command's own zips of a
// nested module, the repository's LICENSE when the module has none. The tree
// should hold only what git would, as a proxy builds its zips from the
// tagged commit.
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
		if err := writeZip(filepath.Join(dir, version+".zip"), module.Version{Path: m.Path, Version: version},
			filepath.Join(root, filepath.FromSlash(m.Dir)), filepath.Join(root, "LICENSE")); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
	}
	return nil
}

// writeZip writes the module zip of dir, adding license (the repository's
// LICENSE) when dir has none.
func writeZip(name string, mv module.Version, dir, license string) (err error) {
	checked, err := modzip.CheckDir(dir)
	if err != nil {
		return err
	}
	var files []modzip.File
	hasLicense := false
	for _, abs := range checked.Valid {
		rel, err := filepath.Rel(dir, abs)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		hasLicense = hasLicense || rel == "LICENSE"
		files = append(files, dirFile{rel, abs})
	}
	if _, err := os.Stat(license); err == nil && !hasLicense {
		files = append(files, dirFile{"LICENSE", license})
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return modzip.Create(f, mv, files)
}

// dirFile is a file of the zip: its path in the module, and on disk.
type dirFile struct{ rel, abs string }

func (f dirFile) Path() string                 { return f.rel }
func (f dirFile) Lstat() (fs.FileInfo, error)  { return os.Lstat(f.abs) }
func (f dirFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }
