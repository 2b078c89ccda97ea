package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/schema"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	code, stdout, stderr := runIn(t, nil, "version")
	is.Equal(code, exitOK)
	is.Equal(stderr, "")
	is.Equal(stdout, fmt.Sprintf("pginbox (devel)\nschema version %d (goose table pginbox_schema_version)\n", schema.Version)+runtime.Version()+"\n") // a test binary is a local build

	code, stdout, _ = runIn(t, nil, "--version", "--json")
	is.Equal(code, exitOK)
	var v jsonVersion
	is.NoErr(json.Unmarshal([]byte(stdout), &v))
	is.Equal(v, jsonVersion{Version: "(devel)", SchemaVersion: schema.Version, GoVersion: runtime.Version()})

	code, _, stderr = runIn(t, nil, "version", "extra")
	is.Equal(code, exitUsage)
	is.True(strings.Contains(stderr, `unexpected argument "extra"`))
}

func TestModuleVersion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	mod := func(path, version string, replace *debug.Module) debug.Module {
		return debug.Module{Path: path, Version: version, Replace: replace}
	}
	info := func(main debug.Module, deps ...debug.Module) *debug.BuildInfo {
		b := &debug.BuildInfo{Main: main}
		for i := range deps {
			b.Deps = append(b.Deps, &deps[i])
		}
		return b
	}
	is.Equal(moduleVersion(nil, false), "(devel)")
	// go install github.com/pginbox/pginbox/cmd/inbox@v1.2.3
	is.Equal(moduleVersion(info(mod(modulePath, "v1.2.3", nil)), true), "v1.2.3")
	// go build in a clone
	is.Equal(moduleVersion(info(mod(modulePath, "(devel)", nil)), true), "(devel)")
	is.Equal(moduleVersion(info(mod(modulePath, "v0.0.0-20250101000000-abcdef123456+dirty", nil)), true), "v0.0.0-20250101000000-abcdef123456+dirty")
	// built by another module (go tool): pginbox is a dependency
	app := mod("example.com/app", "(devel)", nil)
	is.Equal(moduleVersion(info(app, mod("github.com/jackc/pgx/v5", "v5.12.0", nil), mod(modulePath, "v1.4.0", nil)), true), "v1.4.0")
	is.Equal(moduleVersion(info(app, mod(modulePath, "v1.4.0", &debug.Module{Path: "example.com/fork", Version: "v1.4.1"})), true), "v1.4.1")
	is.Equal(moduleVersion(info(app, mod(modulePath, "v1.4.0", &debug.Module{Path: "../pginbox"})), true), "(devel)")
	is.Equal(moduleVersion(info(app), true), "(devel)")
}
