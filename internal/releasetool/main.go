// Command releasetool knows the repository's modules as a release sees them:
// their dependency order (from the go.mod files), the version they require of
// each other, the go.work that builds them together, their tags, and a
// file-based module proxy serving them, to prove they can be fetched. It is a
// module of its own so that golang.org/x/mod stays out of pginbox's module
// graph. scripts/release and scripts/check-release run it; RELEASING.md says
// when.
//
//	releasetool [-C dir] modules          the modules in dependency order: directory, path, tag prefix
//	releasetool [-C dir] version          the version the modules require of each other
//	releasetool [-C dir] check            fails when a go.mod or go.work disagrees with that version
//	releasetool [-C dir] set [-n] [VERSION]
//	                                      rewrites the go.mod files and go.work for VERSION
//	                                      (default: the current one); -n prints the change instead
//	releasetool [-C dir] tidy             go mod tidy in every module, before the version exists
//	releasetool [-C dir] tags VERSION     the release's tags, in dependency order
//	releasetool [-C dir] proxy -o DIR [-version VERSION]
//	                                      writes a file-based module proxy of the tree at VERSION
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "releasetool:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: releasetool [-C dir] modules|version|check|set [-n] [VERSION]|tidy|tags VERSION|proxy -o DIR [-version VERSION]")

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("releasetool", flag.ContinueOnError)
	dir := fs.String("C", ".", "the repository's root `directory`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	root, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	mods, err := loadModules(root)
	if err != nil {
		return err
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	current := func() (string, error) {
		v, ok, err := preparedVersion(mods)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", errors.New("no module of the repository requires another, so no version is being prepared: name one")
		}
		return v, checkVersion(v)
	}
	switch cmd {
	case "modules":
		for _, m := range mods {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", m.Dir, m.Path, m.TagPrefix())
		}
		return nil
	case "version":
		v, err := current()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, v)
		return nil
	case "check":
		v, err := current()
		if err != nil {
			return err
		}
		if err := foreignReplaces(mods); err != nil {
			return err
		}
		changed, err := layout(root, mods, v)
		if err != nil {
			return err
		}
		if len(changed) > 0 {
			return fmt.Errorf("go.work or a go.mod disagrees with the module layout at %s (a module added, moved, or a replace of a pginbox module); run `make work` to write this:\n%s",
				v, diffSummary(root, changed))
		}
		fmt.Fprintf(stdout, "%d modules; go.work uses each; every requirement between them is %s, with no replace\n", len(mods), v)
		return nil
	case "set":
		sfs := flag.NewFlagSet("set", flag.ContinueOnError)
		dry := sfs.Bool("n", false, "print the change instead of writing it")
		if err := sfs.Parse(rest); err != nil {
			return err
		}
		var v string
		switch sfs.NArg() {
		case 0:
			if v, err = current(); err != nil {
				return err
			}
		case 1:
			v = sfs.Arg(0)
		default:
			return errUsage
		}
		if err := checkVersion(v); err != nil {
			return err
		}
		if err := foreignReplaces(mods); err != nil {
			return err
		}
		changed, err := layout(root, mods, v)
		if err != nil {
			return err
		}
		if *dry {
			fmt.Fprint(stdout, diffSummary(root, changed))
			return nil
		}
		var files []string
		for f := range changed {
			files = append(files, f)
		}
		sort.Strings(files)
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(f)), changed[f], 0o644); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "wrote %s\n", f)
		}
		return nil
	case "tidy":
		if len(rest) != 0 {
			return errUsage
		}
		return tidy(root, mods, stdout)
	case "tags":
		if len(rest) != 1 {
			return errUsage
		}
		if err := checkVersion(rest[0]); err != nil {
			return err
		}
		for _, m := range mods {
			fmt.Fprintln(stdout, m.TagPrefix()+rest[0])
		}
		return nil
	case "proxy":
		pfs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		out := pfs.String("o", "", "the proxy's `directory` (created)")
		version := pfs.String("version", "", "the `version` to serve (default: the one being prepared)")
		if err := pfs.Parse(rest); err != nil {
			return err
		}
		if *out == "" || pfs.NArg() != 0 {
			return errUsage
		}
		v := *version
		if v == "" {
			if v, err = current(); err != nil {
				return err
			}
		}
		if err := checkVersion(v); err != nil {
			return err
		}
		if err := buildProxy(root, mods, v, *out, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "proxy at %s: %d modules at %s\n", *out, len(mods), v)
		return nil
	}
	return errUsage
}
