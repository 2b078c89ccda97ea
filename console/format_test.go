package console

import (
	"testing"
	"time"
)

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "<1 s"},
		{999 * time.Millisecond, "<1 s"},
		{42 * time.Second, "42 s"},
		{59*time.Second + 600*time.Millisecond, "1 min"},
		{3*time.Minute + 5*time.Second, "3 min 5 s"},
		{2*time.Hour + 10*time.Minute + 20*time.Second, "2 h 10 min"},
		{30*24*time.Hour - 50*time.Millisecond, "30 d"},
		{4*24*time.Hour + 3*time.Hour, "4 d 3 h"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := ago(now, now.Add(-90*time.Second)); got != "1 min 30 s ago" {
		t.Errorf("ago past: %q", got)
	}
	if got := ago(now, now.Add(4*time.Second)); got != "in 4 s" {
		t.Errorf("ago future: %q", got)
	}
	if got := ago(now, now.Add(-100*time.Millisecond)); got != "just now" {
		t.Errorf("ago now: %q", got)
	}
}

func TestNum(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2024-05-01T12:00:00Z":      time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		"2024-05-01T14:00:00+02:00": time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		"2024-05-01":                time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC),
		"2024-05-01 08:30":          time.Date(2024, 5, 1, 8, 30, 0, 0, time.UTC),
		"24h":                       now.Add(-24 * time.Hour),
		"7d":                        now.Add(-7 * 24 * time.Hour),
	} {
		got, err := parseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-1h", "0d", "1.5d", "2024-13-01"} {
		if _, err := parseTime(in, now); err == nil {
			t.Errorf("parseTime(%q) accepted", in)
		}
	}
}
