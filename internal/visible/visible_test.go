package visible_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/pginbox/pginbox/internal/visible"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"orders.projection.v1", "orders.projection.v1"},
		{"évènement 注文 طلب", "évènement 注文 طلب"}, // scripts, right-to-left ones too, are text
		{"evt-\u202e1100", `evt-\u202e1100`},     // would show as "evt-0011"
		{"a\u2066b\u2069c\u200fd\u061ce", `a\u2066b\u2069c\u200fd\u061ce`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"nb\u00a0sp", `nb\u00a0sp`}, // looks like a space, is not one
		{"line\nbreak\ttab\r", `line\nbreak\ttab\r`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"nul\x00", `nul\x00`},
		{"del\x7f c1\u0085", `del\x7f c1\u0085`},
		{"bad\xff\xfebytes", `bad\xff\xfebytes`},
		{"\uFFFD is a character", "\uFFFD is a character"},
		{"tag\U000E0041", `tag\U000e0041`},
		{`back\slash`, `back\slash`},
	} {
		if got := visible.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTextKeepsLines(t *testing.T) {
	t.Parallel()
	in := "panic: boom\n\tat handler.go:12\x1b[2J\u202e"
	want := "panic: boom\n\tat handler.go:12\\x1b[2J\\u202e"
	if got := visible.Text(in); got != want {
		t.Errorf("Text(%q) = %q, want %q", in, got, want)
	}
}

// Whatever goes in, what comes out is printable (plus newlines and tabs for
// Text), valid UTF-8, and the same text when nothing needed escaping.
func TestEveryRune(t *testing.T) {
	t.Parallel()
	check := func(in, out string, lines bool) {
		t.Helper()
		if !utf8.ValidString(out) {
			t.Fatalf("%q -> %q: invalid UTF-8", in, out)
		}
		for _, r := range out {
			if !strconv.IsPrint(r) && !(lines && (r == '\n' || r == '\t')) {
				t.Fatalf("%q -> %q: %U left unescaped", in, out, r)
			}
			if unicode.Is(unicode.Bidi_Control, r) || unicode.IsControl(r) && !lines {
				t.Fatalf("%q -> %q: %U left unescaped", in, out, r)
			}
		}
	}
	// Planes 0 to 3 and 14 hold every assigned character; 4 to 13 are empty
	// and 15 and 16 private use, so their ends stand for them.
	var runes []rune
	for r := rune(0); r < 0x40000; r++ {
		runes = append(runes, r)
	}
	for r := rune(0xE0000); r < 0xE1000; r++ {
		runes = append(runes, r)
	}
	runes = append(runes, 0x40000, 0xDFFFF, 0xF0000, unicode.MaxRune)
	for _, r := range runes {
		in := "x" + string(r) + "y"
		out, text := visible.String(in), visible.Text(in)
		check(in, out, false)
		check(in, text, true)
		if strconv.IsPrint(r) && out != in {
			t.Fatalf("printable %U changed: %q", r, out)
		}
	}
	for b := 0x80; b <= 0xff; b++ {
		in := "x" + string([]byte{byte(b)}) + "y"
		check(in, visible.String(in), false)
		if want := "x\\x" + strconv.FormatInt(int64(b), 16) + "y"; visible.String(in) != want {
			t.Fatalf("byte %#x: %q, want %q", b, visible.String(in), want)
		}
	}
	if s := strings.Repeat("ok ", 10); visible.String(s) != s {
		t.Fatal("clean text changed")
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	in := "{\n  \"id\": \"evt-\u202e1100\",\n\t\"emoji\": \"\U0001F600\",\n  \"tag\": \"\U000E0041\",\n  \"zw\": \"a\u200bb\"\n}"
	want := "{\n  \"id\": \"evt-\\u202e1100\",\n\t\"emoji\": \"\U0001F600\",\n  \"tag\": \"\\udb40\\udc41\",\n  \"zw\": \"a\\u200bb\"\n}"
	got := visible.JSON(in)
	if got != want {
		t.Fatalf("JSON(%q) =\n%q, want\n%q", in, got, want)
	}
	// Still JSON, and the same value.
	var a, b map[string]string
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("value changed: %v -> %v", a, b)
	}
}
