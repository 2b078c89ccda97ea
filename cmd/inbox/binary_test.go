package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

// TestBinary runs the inbox binary the way a user does: built once, run as a
// process against a test database, judged by its output and exit code. The
// subtests share the build, which t.TempDir removes afterwards.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inbox")
	t0 := time.Now()
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", bin, time.Since(t0).Round(time.Millisecond))

	t.Run("MigrateEmptyDatabase", func(t *testing.T) { t.Parallel(); testBinaryMigrate(t, bin) })
	t.Run("AdminCommands", func(t *testing.T) { t.Parallel(); testBinaryAdmin(t, bin) })
	t.Run("Version", func(t *testing.T) { t.Parallel(); testBinaryVersion(t, bin) })
	t.Run("Tenancy", func(t *testing.T) { t.Parallel(); testBinaryTenancy(t, bin) })
	t.Run("RequeueWithoutUser", func(t *testing.T) { t.Parallel(); testBinaryRequeueWithoutUser(t, bin) })
	t.Run("Demo", func(t *testing.T) { t.Parallel(); testBinaryDemo(t, bin) })
	t.Run("DemoInterrupted", func(t *testing.T) { t.Parallel(); testBinaryDemoInterrupted(t, bin) })
	t.Run("DemoOnDatabaseURL", func(t *testing.T) { t.Parallel(); testBinaryDemoDatabaseURL(t, bin) })
}

type result struct {
	code           int
	stdout, stderr string
}

// cleanEnv is the test process's environment without anything that would
// point the binary at a database.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, envDatabaseURL+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func runBin(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("inbox %s: %v", strings.Join(args, " "), err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

func (r result) expect(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		return
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

func testBinaryMigrate(t *testing.T, bin string) {
	env := cleanEnv("DATABASE_URL=" + inboxtest.EmptyDatabase(t))

	// A database without the schema: every admin command says what to do.
	for _, args := range [][]string{{"stats"}, {"list"}, {"show", "01J0000000000000000000000A"}} {
		runBin(t, bin, env, args...).expect(t, exitNotMigrated, nil,
			[]string{"schema not migrated", "run `inbox migrate up`"})
	}
	runBin(t, bin, env, "migrate", "status").expect(t, exitOK,
		[]string{"1        pending  00001_receipts_v1.sql", "2        pending  00002_receipts_v2.sql", "run `inbox migrate up`"}, nil)
	runBin(t, bin, env, "migrate", "up").expect(t, exitOK,
		[]string{"applied 00001_receipts_v1.sql\napplied 00002_receipts_v2.sql\n", fmt.Sprintf("schema at version %d: up to date", schema.Version)}, nil)
	runBin(t, bin, env, "migrate", "up").expect(t, exitOK, []string{"nothing to do"}, nil)
	runBin(t, bin, env, "stats").expect(t, exitOK, []string{"no receipts"}, nil)

	r := runBin(t, bin, env, "migrate", "status", "--json")
	r.expect(t, exitOK, nil, nil)
	var st jsonMigrateResult
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("migrate status --json: %v\n%s", err, r.stdout)
	}
	if st.Current != schema.Version || len(st.Migrations) != int(schema.Version) || !st.Migrations[len(st.Migrations)-1].Applied {
		t.Errorf("migrate status --json: %+v", st)
	}

	last, prev := lastMigration(t), schema.Version-1
	runBin(t, bin, env, "migrate", "down").expect(t, exitOK,
		[]string{"rolled back " + last, fmt.Sprintf("schema at version %d; this build needs %d", prev, schema.Version)}, nil)
	runBin(t, bin, env, "stats").expect(t, exitNotMigrated, nil, []string{fmt.Sprintf("expected version %d, found %d", schema.Version, prev)})
	runBin(t, bin, env, "migrate", "up", "--to", fmt.Sprint(schema.Version)).expect(t, exitOK, []string{"applied " + last}, nil)

	// Version 0 drops every table: refused without --yes, saying what it drops.
	runBin(t, bin, env, "migrate", "down", "--to", "0").expect(t, exitUsage, nil,
		[]string{fmt.Sprintf("refusing to roll back from version %d to 0 without --yes: it drops pginbox_receipts (0 rows)", schema.Version), "pginbox_audit (0 rows)"})
	runBin(t, bin, env, "stats").expect(t, exitOK, []string{"no receipts"}, nil)
	runBin(t, bin, env, "migrate", "down", "--to", "0", "--yes").expect(t, exitOK,
		[]string{"rolled back 00002_receipts_v2.sql\nrolled back 00001_receipts_v1.sql\n", "schema at version 0"}, nil)
}

func testBinaryVersion(t *testing.T, bin string) {
	// The version the toolchain stamped into the binary, as `go version -m` reads it.
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\tmod\tgithub\.com/pginbox/pginbox\t(\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("go version -m names no pginbox module:\n%s", out)
	}
	runBin(t, bin, cleanEnv(), "version").expect(t, exitOK,
		[]string{"pginbox " + string(m[1]) + "\n", fmt.Sprintf("schema version %d (goose table pginbox_schema_version)\n", schema.Version)}, nil)
}

// testBinaryRequeueWithoutUser: cron and containers often have no $USER; a
// requeue still works and is audited as the process's user.
func testBinaryRequeueWithoutUser(t *testing.T, bin string) {
	f := newFixture(t)
	var env []string
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "USER=") && !strings.HasPrefix(kv, "LOGNAME=") {
			env = append(env, kv)
		}
	}
	want := "uid:" + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		want = u.Username
	}
	db := []string{"--database-url", f.dsn}
	runBin(t, bin, env, append([]string{"requeue", f.dead.String(), "--version", "3", "--reason", "retry"}, db...)...).expect(t, exitOK,
		[]string{"requeued " + f.dead.String()}, nil)
	var actor string
	if err := f.pool.QueryRow(context.Background(), "SELECT actor FROM pginbox_audit WHERE receipt_id = $1", f.dead).Scan(&actor); err != nil {
		t.Fatal(err)
	}
	if actor != want {
		t.Errorf("audit actor %q, want %q", actor, want)
	}
}

func testBinaryAdmin(t *testing.T, bin string) {
	is := is.New(t)
	f := newFixture(t)
	env := cleanEnv("USER=ci")
	db := []string{"--database-url", f.dsn}

	runBin(t, bin, env, append([]string{"stats", "--completed"}, db...)...).expect(t, exitOK,
		[]string{"CONSUMER", "orders.projection.v1  1        0           0          2     1", "dead: 2"}, nil)

	r := runBin(t, bin, env, append([]string{"list", "--json"}, db...)...)
	r.expect(t, exitOK, nil, nil)
	var page jsonList
	is.NoErr(json.Unmarshal([]byte(r.stdout), &page))
	is.Equal(len(page.Receipts), 4)
	is.Equal(page.Next, "")

	runBin(t, bin, env, append([]string{"show", f.dead.String()}, db...)...).expect(t, exitOK,
		[]string{"status       DEAD", "version      3", "last error   unsupported currency", `"orderId": "evt-1"`}, nil)

	// Wrong version: refused with exit 4 and a way forward; nothing changed.
	runBin(t, bin, env, append([]string{"requeue", f.dead.String(), "--version", "7", "--reason", "retry"}, db...)...).expect(t, exitRefused,
		nil, []string{"version conflict: expected version 7 but the receipt is at version 3", "hint: run `inbox show " + f.dead.String()})
	runBin(t, bin, env, append([]string{"show", f.dead.String()}, db...)...).expect(t, exitOK, []string{"status       DEAD"}, nil)

	// Another tenant's receipt is not found in a tenant view.
	runBin(t, bin, env, append([]string{"requeue", f.dead.String(), "--tenant", "tenant-b", "--version", "3", "--reason", "retry"}, db...)...).
		expect(t, exitNotFound, nil, []string{"receipt not found"})

	runBin(t, bin, env, append([]string{"requeue", f.dead.String(), "--version", "3", "--reason", "retry"}, db...)...).expect(t, exitOK,
		[]string{"requeued " + f.dead.String() + ": DEAD -> PENDING, version 3 -> 4"}, nil)
	runBin(t, bin, env, append([]string{"purge", "--older-than", "720h"}, db...)...).expect(t, exitOK,
		[]string{"purged 1 payload in 1 batch of at most 1000 (", "); cutoff: completed before "}, nil)

	// A server that is not there: a clear error, exit 1.
	runBin(t, bin, env, "stats", "--database-url", "host=/nonexistent port=1 user=x dbname=x connect_timeout=2").expect(t, exitError,
		nil, []string{"cannot connect to PostgreSQL", "check --database-url or $DATABASE_URL"})
}

// testBinaryTenancy: the application role's DATABASE_URL, as a deployment
// sets it, sees one tenant with --tenant and is told what to do without it.
func testBinaryTenancy(t *testing.T, bin string) {
	f := newFixture(t)
	app := newRole(t, f.pool, "shop_app", "")
	owner := cleanEnv("DATABASE_URL=" + f.dsn)
	asApp := cleanEnv("DATABASE_URL=" + dsnAs(t, f.dsn, app))

	runBin(t, bin, owner, "tenancy", "disable").expect(t, exitUsage, nil,
		[]string{"refusing to disable row-level security without --yes", "run `inbox help tenancy disable` for usage"})
	runBin(t, bin, owner, "tenancy", "grant", app).expect(t, exitOK, []string{"TO " + app + ";"}, nil)
	runBin(t, bin, owner, "tenancy", "enable").expect(t, exitOK, []string{"row-level security enabled and forced"}, nil)
	runBin(t, bin, asApp, "tenancy", "status").expect(t, exitOK, []string{"tenancy: enabled", "role " + app + ": held to row-level security"}, nil)
	runBin(t, bin, asApp, "list", "--tenant", "tenant-b").expect(t, exitOK, []string{f.other.String()}, nil)
	runBin(t, bin, asApp, "show", f.other.String(), "--tenant", "tenant-a").expect(t, exitNotFound, nil, []string{"receipt not found"})
	runBin(t, bin, asApp, "stats").expect(t, exitError, nil,
		[]string{"row-level security restricts this role to one scope", "hint: pass --tenant ID (or --global)"})
}

// demoSummary are lines the demo prints only when its scenario ran to the end.
var demoSummary = []string{
	"IDENTITY_CONFLICT     -> reject",
	"duplicate (",
	"payment gateway timeout -> RETRYABLE",
	`unsupported currency "XXX" -> permanent failure, DEAD`,
	"requeued ",
	"status       COMPLETED",
	"event        order.created v1", // the walkthrough's event, not a vocabulary of its own
	" (changes so far; requeue, replay and skip take it as --version)",
	"attempts     1 of 10 (tries used of the retry budget)", // a requeue gives a fresh budget
	"deliveries: 14 (10 accepted, 3 duplicates, 1 conflict)",
	"handler: 14 attempts, 3 transient failures retried, 1 permanent failure fixed by requeue",
	"receipts: 10 of 10 COMPLETED, 0 DEAD",
	"projection: 10 rows for 10 orders in pginbox_demo_orders (one per order)",
	"demo finished in ",
}

var readyLine = regexp.MustCompile(`PostgreSQL ready in \S+ at (\S+)`)

func needServerBinaries(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("the demo starts its own PostgreSQL: %v", err)
	}
}

func testBinaryDemo(t *testing.T, bin string) {
	needServerBinaries(t)
	t0 := time.Now()
	r := runBin(t, bin, cleanEnv(), "demo")
	elapsed := time.Since(t0)
	r.expect(t, exitOK, append([]string{"No DATABASE_URL set: starting a throwaway PostgreSQL"}, demoSummary...), nil)
	t.Logf("demo ran in %s", elapsed.Round(time.Millisecond)) // a figure, not a verdict: the machine may be busy
	m := readyLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no ready line:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "Stopped PostgreSQL and removed "+m[1]) {
		t.Errorf("no clean-up line for %s", m[1])
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s still exists after the demo (%v)", m[1], err)
	}
	if strings.Contains(r.stdout, "\r") {
		t.Errorf("carriage returns in non-terminal output")
	}
}

func testBinaryDemoInterrupted(t *testing.T, bin string) {
	needServerBinaries(t)
	cmd := exec.Command(bin, "demo")
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt as soon as the scenario is under way.
	sc := bufio.NewScanner(stdout)
	var dir string
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
			dir = m[1]
		}
		if strings.Contains(sc.Text(), "deliver  evt-1002") {
			break
		}
	}
	if dir == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("demo did not get going:\n%s\n%s", strings.Join(seen, "\n"), errOut.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("demo did not exit within 30s of SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit code %d after SIGINT, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, rest, errOut.String())
	}
	if !strings.Contains(string(rest), "Stopped PostgreSQL and removed "+dir) {
		t.Errorf("no clean-up line after SIGINT:\n%s", rest)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s still exists after SIGINT (%v)", dir, err)
	}
	if !strings.Contains(errOut.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted: %q", errOut.String())
	}
}

func testBinaryDemoDatabaseURL(t *testing.T, bin string) {
	env := cleanEnv("DATABASE_URL=" + inboxtest.EmptyDatabase(t))
	// Not migrated and not asked to: refused with the two ways out.
	runBin(t, bin, env, "demo").expect(t, exitNotMigrated, nil,
		[]string{"schema not migrated", "run `inbox migrate up`", "inbox demo --migrate"})
	r := runBin(t, bin, env, "demo", "--migrate")
	r.expect(t, exitOK, append([]string{fmt.Sprintf("Schema migrated to version %d", schema.Version)}, demoSummary[4:]...),
		nil)
	if !strings.Contains(r.stdout, "left in your database: table pginbox_demo_orders") {
		t.Errorf("the demo does not say what it left behind:\n%s", r.stdout)
	}
	// A second run on the same database works too (its own tenant).
	runBin(t, bin, env, "demo").expect(t, exitOK, demoSummary[4:], nil)
}

// lastMigration is the file name of the newest embedded migration.
func lastMigration(t testing.TB) string {
	t.Helper()
	files, err := fs.Glob(schema.FS(), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v %v", files, err)
	}
	slices.Sort(files)
	return files[len(files)-1]
}
