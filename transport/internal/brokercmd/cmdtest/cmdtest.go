// Package cmdtest runs a transport program's main in a child process (the
// test binary itself), to check its flags and exit codes as a user sees them.
package cmdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

const envArgs = "PGINBOX_CMDTEST_ARGS"

// Child runs main with the arguments a parent's Run passed, and exits 0 when
// main returns. Call it first in TestMain; it returns at once in a parent.
func Child(main func()) {
	raw := os.Getenv(envArgs)
	if raw == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		panic(err)
	}
	os.Args = append([]string{os.Args[0]}, args...)
	main()
	os.Exit(0)
}

// Run runs the program with args and env (added to this process's
// environment) and returns its exit code and stderr. A program still running
// after timeout is killed and reported as exit -1.
func Run(t testing.TB, timeout time.Duration, env []string, args ...string) (code int, stderr string) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envArgs+"="+string(raw)), env...)
	var buf bytes.Buffer
	cmd.Stderr = &buf
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, buf.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), buf.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, buf.String()
}
