package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/visible"
)

// Template functions. None returns template.HTML: every value, payloads and
// error texts above all, is escaped by html/template. Values from producers,
// handlers and users (identities, error texts, metadata, reasons, actors) go
// through vis or vistext first, so a control or bidirectional character shows
// as an escape (\u202e) instead of reordering or hiding the text around it.
var funcs = template.FuncMap{
	"vis":      visible.String,
	"vistext":  visible.Text,
	"utc":      utcTime,
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ago":      ago,
	"dur":      humanDuration,
	"num":      num,
	"status":   statusClass,
	"truncate": truncate,
	"hex":      hex.EncodeToString,
	"at":       func(now, t time.Time) timeAt { return timeAt{Now: now, T: t} },
}

// timeAt is the argument of the "time" template: an instant and the page's now.
type timeAt struct{ Now, T time.Time }

// utcTime prints an instant in UTC to the second, as the CLI does.
func utcTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// ago says when t was (or will be) relative to now: "3 min 5 s ago", "in 4 s".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0 && -d >= time.Second:
		return "in " + humanDuration(-d)
	case d < time.Second:
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// humanDuration shows a duration in its two largest units, rounded:
// "42 s", "3 min 5 s", "2 h 10 min", "4 d 3 h"; a zero second unit is left
// out ("30 d").
func humanDuration(d time.Duration) string {
	two := func(n1 int64, u1 string, n2 int64, u2 string) string {
		if n2 == 0 {
			return fmt.Sprintf("%d %s", n1, u1)
		}
		return fmt.Sprintf("%d %s %d %s", n1, u1, n2, u2)
	}
	if d < time.Second {
		return "<1 s"
	}
	if r := d.Round(time.Second); r < time.Hour {
		s := int64(r / time.Second)
		if s < 60 {
			return fmt.Sprintf("%d s", s)
		}
		return two(s/60, "min", s%60, "s")
	}
	if r := d.Round(time.Minute); r < 24*time.Hour {
		m := int64(r / time.Minute)
		return two(m/60, "h", m%60, "min")
	}
	h := int64(d.Round(time.Hour) / time.Hour)
	return two(h/24, "d", h%24, "h")
}

// num groups thousands: 1234567 -> "1,234,567".
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// statusClass is the CSS class of a status badge. The badge always shows the
// status as text too; colour only repeats it.
func statusClass(s inbox.Status) string {
	switch s {
	case inbox.StatusPending, inbox.StatusProcessing, inbox.StatusRetryable, inbox.StatusCompleted, inbox.StatusDead:
		return "badge badge-" + strings.ToLower(string(s))
	}
	return "badge"
}

// echoBytes is how much of a rejected value an error repeats: enough to
// recognise it. A value may be kilobytes without a break.
const echoBytes = 64

// echo quotes a rejected value for an error text, escaped as Go quotes it
// (invalid bytes as \xff). A value longer than echoBytes is cut at a
// character's start, with its length: `"abc"… (5000 bytes)`.
func echo(v string) string {
	if len(v) <= echoBytes {
		return strconv.Quote(v)
	}
	i := 0
	for {
		_, size := utf8.DecodeRuneInString(v[i:])
		if i+size > echoBytes {
			break
		}
		i += size
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:i]), len(v))
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// prettyJSON indents a stored payload for reading, with the characters vis
// would escape written as JSON escapes. A value that is not JSON (it always
// is; this is belt and braces) is shown as stored, escaped.
func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return visible.Text(string(raw))
	}
	return visible.JSON(buf.String())
}
