package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
)

// Bounds of the durations the CLI takes. They are far beyond any sensible
// value and far below where time.Duration (about 292 years) wraps around, so a
// typo can never turn into a short duration.
const (
	// maxAge bounds every age: --older-than, and --since/--until given as ages.
	maxAge = 36500 * 24 * time.Hour // 100 years
	// maxPause bounds purge's --pause.
	maxPause = time.Hour
)

const (
	wantAge = "want an age like 720h, 90m or 30d, at most 36500d (100 years)"
	// wantRetention is wantAge without zero: purge's --older-than.
	wantRetention = "want a positive age like 720h, 90m or 30d, at most 36500d (100 years)"
	wantPause     = "want a duration like 100ms, 2s or 1m, from 0 to 1h"
	wantTime      = "want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01, UTC) or an age (24h, 7d: that long ago, at most 36500d)"
	wantID        = "want a receipt ID: a 26-character ULID (as `inbox list` prints it) or a UUID"
)

// parseDuration parses a Go duration (90m, 1h30m, 500ms) or whole days (30d).
// Both report overflow as an error instead of wrapping around.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("%s days overflows a duration", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// parseAge parses an age (a duration into the past) from 0 to maxAge.
func parseAge(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil || d < 0 || d > maxAge {
		return 0, errors.New(wantAge)
	}
	return d, nil
}

// parseTime accepts RFC 3339 (2024-05-01T00:00:00Z), a date (2024-05-01, UTC)
// or an age relative to now (24h, 7d: that long ago).
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New(wantTime)
}

// parseID parses a receipt ID (ULID or UUID form).
func parseID(s string) (inbox.ID, error) {
	var id inbox.ID
	if err := id.UnmarshalText([]byte(s)); err != nil {
		return id, errors.New(wantID)
	}
	return id, nil
}

// parseIDArg parses a receipt ID given as an argument.
func parseIDArg(s string) (inbox.ID, error) {
	id, err := parseID(s)
	if err != nil {
		return id, usagef("%q: %v", s, err)
	}
	return id, nil
}

// numberFlag is a whole-number flag within [min, max]; noun says what the
// number is ("a whole number" if empty).
type numberFlag struct {
	n        int64
	set      bool
	min, max int64
	noun     string
}

// numberVar defines a number flag with default def.
func numberVar(fs *flag.FlagSet, name string, def, min, max int64, usage string) *numberFlag {
	f := &numberFlag{n: def, min: min, max: max, noun: "a whole number"}
	fs.Var(f, name, usage)
	return f
}

func (f *numberFlag) String() string { return strconv.FormatInt(f.n, 10) }

func (f *numberFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < f.min || n > f.max {
		if f.max == math.MaxInt64 {
			return fmt.Errorf("want %s, at least %d", f.noun, f.min)
		}
		return fmt.Errorf("want %s from %d to %d", f.noun, f.min, f.max)
	}
	f.n, f.set = n, true
	return nil
}

// durationFlag is a duration flag within [min, max]; want says what it takes.
type durationFlag struct {
	d        time.Duration
	set      bool
	min, max time.Duration
	want     string
}

func (f *durationFlag) String() string {
	if f.d == 0 {
		return "0s"
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil || d < f.min || d > f.max {
		return errors.New(f.want)
	}
	f.d, f.set = d, true
	return nil
}

// timeFlag is an instant given as a time, a date or an age before now.
type timeFlag struct {
	t   time.Time
	now time.Time
}

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) (err error) {
	f.t, err = parseTime(s, f.now)
	return err
}

// idFlag is a receipt ID.
type idFlag struct{ id inbox.ID }

func (f *idFlag) String() string { return idString(f.id) }

func (f *idFlag) Set(s string) (err error) {
	f.id, err = parseID(s)
	return err
}

// nameFlag is a filter on a name (consumer, source, destination, ordering
// key). A value no identity can hold (invalid UTF-8, a control character
// such as NUL, more than 255 bytes) is a usage error: PostgreSQL cannot
// compare such text. Empty means no filter.
type nameFlag struct{ s string }

func (f *nameFlag) String() string { return f.s }

func (f *nameFlag) Set(s string) error {
	if err := checkName(s); err != nil {
		return err
	}
	f.s = s
	return nil
}

// checkName applies the identity rules to a non-empty name given on the
// command line.
func checkName(s string) error {
	if rule, detail := inboxtype.CheckIdentityString(s); rule != "" && rule != inboxtype.IdentityRequired {
		return fmt.Errorf("%s; names are UTF-8 text without control characters, at most %d bytes", detail, inboxtype.MaxIdentityBytes)
	}
	return nil
}

// statusesFlag is a comma-separated list of receipt statuses, any case.
type statusesFlag struct{ list []inbox.Status }

var knownStatuses = []inbox.Status{inbox.StatusPending, inbox.StatusProcessing, inbox.StatusRetryable, inbox.StatusCompleted, inbox.StatusDead}

func (f *statusesFlag) String() string {
	names := make([]string, len(f.list))
	for i, s := range f.list {
		names[i] = string(s)
	}
	return strings.Join(names, ",")
}

func (f *statusesFlag) Set(s string) error {
	f.list = nil
	for _, part := range strings.Split(s, ",") {
		st := inbox.Status(strings.ToUpper(strings.TrimSpace(part)))
		if !slices.Contains(knownStatuses, st) {
			return errors.New("want statuses separated by commas: PENDING, PROCESSING, RETRYABLE, COMPLETED, DEAD")
		}
		f.list = append(f.list, st)
	}
	return nil
}
