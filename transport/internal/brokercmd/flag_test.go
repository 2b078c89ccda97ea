package brokercmd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

type testOptions struct {
	url, queue, secret string
	brokers            []string
	limit              int64
	wait               time.Duration
	declare            bool
}

func testFlags(o *testOptions) []Flag {
	return []Flag{
		Var(&o.url, "url", "amqp://localhost/", "broker URL").Env("TEST_URL"),
		List(&o.brokers, "brokers", "seed brokers, comma separated").Env("TEST_BROKERS").Required(),
		Var(&o.queue, "queue", "", "queue to consume").Required().Logged(),
		Secret(&o.secret, "TEST_SECRET", "the shared secret").Required(),
		Var(&o.limit, "limit", 20, "deliveries before a dead letter"),
		Var(&o.wait, "wait", time.Second, "wait"),
		Var(&o.declare, "declare", false, "declare the queue"),
	}
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// A program's flag table reads flags and environment variables into its
// options, and reports a missing required one (in table order, before the
// inbox flags) as a usage error naming its flag or variable.
func TestFlagTable(t *testing.T) {
	inboxArgs := []string{"-database-url", "x", "-tenant", "t", "-source", "s", "-consumer", "c"}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "-brokers (or TEST_BROKERS) is required"},
		{[]string{"-brokers", "a:1"}, nil, "-queue is required"},
		{[]string{"-brokers", "a:1", "-queue", "q"}, nil, "TEST_SECRET is not set: export the shared secret"},
		{[]string{"-brokers", "a:1", "-queue", "q"}, map[string]string{"TEST_SECRET": "s"}, "-database-url (or DATABASE_URL) is required"},
		{[]string{"-brokers", "a:1", "-queue", "q", "-limit", "many"}, nil, `invalid value "many" for flag -limit`},
	} {
		var stderr bytes.Buffer
		code := testProgram(nil).Run(context.Background(), tc.args, env(tc.env), &stderr)
		if code != ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q %v: exit %d, stderr %q; want %d and %q", tc.args, tc.env, code, stderr.String(), ExitUsage, tc.want)
		}
	}

	var got testOptions
	p := testProgram(func(o *testOptions) error { got = *o; return errStop })
	var stderr bytes.Buffer
	args := append([]string{"-queue", "q", "-limit", "3", "-wait", "2m", "-declare"}, inboxArgs...)
	vars := map[string]string{"TEST_URL": "amqp://env/", "TEST_BROKERS": "a:1,b:2", "TEST_SECRET": "s3cret"}
	if code := p.Run(context.Background(), args, env(vars), &stderr); code != ExitError || !strings.Contains(stderr.String(), errStop.Error()) {
		t.Fatalf("exit %d, stderr %q; want %d and the check's error", code, stderr.String(), ExitError)
	}
	want := testOptions{url: "amqp://env/", queue: "q", secret: "s3cret", brokers: []string{"a:1", "b:2"}, limit: 3, wait: 2 * time.Minute, declare: true}
	if got.url != want.url || got.queue != want.queue || got.secret != want.secret || strings.Join(got.brokers, ",") != "a:1,b:2" ||
		got.limit != want.limit || got.wait != want.wait || got.declare != want.declare {
		t.Fatalf("options %+v, want %+v", got, want)
	}

	// -help lists the table's flags with their environment variable and
	// whether they are required.
	stderr.Reset()
	if code := testProgram(nil).Run(context.Background(), []string{"-help"}, env(nil), &stderr); code != ExitOK {
		t.Fatalf("-help: exit %d", code)
	}
	for _, want := range []string{"broker URL (env TEST_URL)", "seed brokers, comma separated (env TEST_BROKERS, required)", "queue to consume (required)", "-event-type"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-help does not say %q:\n%s", want, stderr.String())
		}
	}
}

var errStop = errors.New("stopped by the test")

// testProgram is a program over testFlags; dial, when set, is the -url
// flag's Dial, run when the program starts.
func testProgram(dial func(o *testOptions) error) Program[testOptions] {
	return Program[testOptions]{
		Name:      "test-inbox",
		EventType: "the type property",
		Flags: func(o *testOptions) []Flag {
			flags := testFlags(o)
			if dial != nil {
				flags[0] = flags[0].Dial(func(context.Context, *Session) error { return dial(o) })
			}
			return flags
		},
		Serve: func(*testOptions, *Session) (Runner, error) { return nil, errors.New("Serve ran") },
	}
}

// What a flag dials fails the program (exit 1) before the database is
// dialled: -database-url here names none that could answer.
func TestDialBeforeDatabase(t *testing.T) {
	p := testProgram(func(o *testOptions) error { return errors.New("-url: bad broker " + o.url) })
	var stderr bytes.Buffer
	args := []string{"-brokers", "a:1", "-queue", "q", "-database-url", "postgres://127.0.0.1:1/none?connect_timeout=1",
		"-tenant", "t", "-source", "s", "-consumer", "c"}
	code := p.Run(context.Background(), args, env(map[string]string{"TEST_SECRET": "s"}), &stderr)
	if code != ExitError || !strings.Contains(stderr.String(), "test-inbox: -url: bad broker amqp://localhost/") {
		t.Fatalf("exit %d, stderr %q; want %d and the dial's error", code, stderr.String(), ExitError)
	}
}
