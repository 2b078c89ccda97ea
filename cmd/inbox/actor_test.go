package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/user"
	"strconv"
	"testing"

	"github.com/matryer/is"
)

// TestActorWithoutUser: requeue and replay never fail for want of $USER; they
// fall back to the OS account, then to the user ID, and --actor overrides all.
func TestActorWithoutUser(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	noUser := map[string]string{"DATABASE_URL": f.dsn} // no USER, no LOGNAME
	// The OS account.
	osUser, err := user.Current()
	is.NoErr(err)
	code, _, stderr := runIn(t, noUser, "requeue", f.dead.String(), "--version", "3", "--reason", "retry")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.Equal(lastActor(t, f, f.dead.String()), osUser.Username)

	// No account for the user ID either (containers running as an arbitrary UID).
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string { return noUser[k] },
		currentUser: func() (*user.User, error) { return nil, errors.New("user: unknown userid 12345") }}
	code = e.run(context.Background(), []string{"requeue", f.other.String(), "--version", "3", "--reason", "retry"})
	is.Equal(errOut.String(), "")
	is.Equal(code, exitOK)
	is.Equal(lastActor(t, f, f.other.String()), "uid:"+strconv.Itoa(os.Getuid()))

	// $LOGNAME, then --actor over everything.
	code, _, _ = runIn(t, map[string]string{"DATABASE_URL": f.dsn, "LOGNAME": "cron"},
		"replay", f.completed.String(), "--version", "4", "--reason", "rebuild")
	is.Equal(code, exitOK)
	is.Equal(lastActor(t, f, f.completed.String()), "cron")
	code, _, _ = runIn(t, map[string]string{"DATABASE_URL": f.dsn, "USER": "root"},
		"replay", f.completed.String(), "--version", "5", "--reason", "rebuild", "--actor", "alice")
	is.Equal(code, exitOK)
	is.Equal(lastActor(t, f, f.completed.String()), "alice")
}

// lastActor is the actor of the receipt's latest audit row.
func lastActor(t *testing.T, f *fixture, id string) string {
	t.Helper()
	rid, err := parseID(id)
	if err != nil {
		t.Fatal(err)
	}
	var actor string
	if err := f.pool.QueryRow(context.Background(),
		"SELECT actor FROM pginbox_audit WHERE receipt_id = $1 ORDER BY id DESC LIMIT 1", rid).Scan(&actor); err != nil {
		t.Fatal(err)
	}
	return actor
}
