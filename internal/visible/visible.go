// Package visible escapes text for people to read: identities, error texts and
// audit reasons come from producers, handlers and operators, and a character
// that does not show as itself (a control character, a bidirectional override
// such as U+202E, a zero-width space, invalid UTF-8) would otherwise reorder,
// hide or restyle what is shown around it. The web console and the inbox CLI
// show such values through this package only.
package visible

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// String returns s for display on one line: every character that is not
// printable (strconv.IsPrint: letters, marks, numbers, punctuation, symbols
// and the ASCII space) is replaced by its Go escape, \n, \x1b, \u202e or
// \U000e0041, and every byte of invalid UTF-8 by \xff. Printable text,
// right-to-left scripts included, is returned unchanged.
//
// A backslash is not escaped, so a literal "\u202e" reads like an escaped
// U+202E; both are harmless, and escaping backslashes would double those of
// every quoted string in error texts.
func String(s string) string { return escape(s, false) }

// Text is String for text of several lines, such as an error with a stack
// trace: newlines and tabs are kept, everything else is escaped as String
// does.
func Text(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	keep := func(r rune) bool { return strconv.IsPrint(r) || lines && (r == '\n' || r == '\t') }
	// Most values need nothing: return them without copying.
	clean := true
	for i, r := range s {
		if r == utf8.RuneError && isInvalid(s, i) || !keep(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, r := range s {
		switch {
		case r == utf8.RuneError && isInvalid(s, i):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keep(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r) // '\u202e', '\x1b', '\n'
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// isInvalid reports whether the RuneError at s[i] stands for an invalid byte
// rather than an encoded U+FFFD.
func isInvalid(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// JSON returns JSON text (a payload, pretty-printed or not) with every
// character that String would escape written as a JSON escape (\u202e, or a
// surrogate pair beyond the BMP), so it shows as itself and still parses to
// the same value. Newlines and tabs (indentation) are kept. It expects valid
// JSON; invalid UTF-8 is escaped as String does, which is then no longer
// JSON.
func JSON(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && isInvalid(s, i):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r) || r == '\n' || r == '\t':
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
