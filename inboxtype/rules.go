package inboxtype

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIdentityBytes is the longest identity string (scope ID, source, consumer,
// message ID, event type) in bytes.
const MaxIdentityBytes = 255

// IdentityRule names a rule an identity string can break. The values are the
// rule names inbox reports in a ValidationError.
type IdentityRule string

const (
	IdentityRequired    IdentityRule = "required"          // the string is empty
	IdentityTooLong     IdentityRule = "too_long"          // longer than MaxIdentityBytes
	IdentityInvalidUTF8 IdentityRule = "invalid_utf8"      // not valid UTF-8
	IdentityControlChar IdentityRule = "control_character" // holds a control character
)

// CheckIdentityString applies the identity string rules: 1..MaxIdentityBytes
// bytes of valid UTF-8 without control characters. It returns the first rule s
// breaks and what is wrong, or "" and "" when s is valid. The runtime and the
// code generator both call it, so a declaration that generates is one that
// accepts.
func CheckIdentityString(s string) (rule IdentityRule, detail string) {
	if s == "" {
		return IdentityRequired, "must not be empty"
	}
	if len(s) > MaxIdentityBytes {
		return IdentityTooLong, fmt.Sprintf("%d bytes: at most %d allowed", len(s), MaxIdentityBytes)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return IdentityInvalidUTF8, fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if unicode.IsControl(r) {
			return IdentityControlChar, fmt.Sprintf("control character %U at byte %d", r, i)
		}
	}
	return "", ""
}
