// Package errtext makes error messages storable in a text column: the
// last_error of receipts and outbox events.
package errtext

import "strings"

// MaxLength bounds the stored text, in bytes (plus an ellipsis).
const MaxLength = 4000

// Storable returns err's message as valid UTF-8 without NUL (which
// PostgreSQL text cannot hold), cut at MaxLength bytes.
func Storable(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\x00`)
	if len(s) > MaxLength {
		s = strings.ToValidUTF8(s[:MaxLength], "") + "…"
	}
	return s
}
