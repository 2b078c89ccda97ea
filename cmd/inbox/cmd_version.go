package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/pginbox/pginbox/schema"
)

var versionCmd = &command{
	Name:    "version",
	Args:    "[--json]",
	Summary: "print this build's pginbox version and the schema version it needs",
	Help: `
The pginbox version is the module version the binary was built from: a release
tag (go install ...@v1.2.3), a pseudo-version for a commit, or (devel) for a
local build without version control information. The schema version is what
the commands that read receipts require of the database; ` + "`inbox migrate status`" + `
shows the database's.`,
}

func init() {
	versionCmd.Run = runVersion
	register(versionCmd)
}

// modulePath is the module this binary belongs to.
const modulePath = "github.com/pginbox/pginbox"

type jsonVersion struct {
	Version       string `json:"version"`
	SchemaVersion int64  `json:"schema_version"`
	GoVersion     string `json:"go_version"`
}

func runVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlags(versionCmd)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(e, versionCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	v := jsonVersion{Version: moduleVersion(debug.ReadBuildInfo()), SchemaVersion: schema.Version, GoVersion: runtime.Version()}
	if *asJSON {
		return writeJSON(e.stdout, v)
	}
	fmt.Fprintf(e.stdout, "pginbox %s\nschema version %d (goose table %s)\n%s\n", v.Version, v.SchemaVersion, schema.VersionTable, v.GoVersion)
	return nil
}

// moduleVersion finds pginbox's version in the build information: the main
// module for `go install`/`go build`, a dependency when another module builds
// the command (go tool). Local builds without version information are
// "(devel)".
func moduleVersion(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "(devel)"
	}
	m := &info.Main
	if m.Path != modulePath {
		m = nil
		for _, d := range info.Deps {
			if d.Path == modulePath {
				m = d
				break
			}
		}
	}
	if m == nil {
		return "(devel)"
	}
	if m.Replace != nil {
		m = m.Replace // a replace by a local directory has no version
	}
	if m.Version == "" {
		return "(devel)"
	}
	return m.Version
}
