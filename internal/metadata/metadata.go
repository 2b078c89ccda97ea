// Package metadata stores message metadata (trace headers, correlation and
// causation IDs): a map of strings kept as a JSON object in a jsonb column.
// The inbox and the outbox share its rules, so metadata an outbox event
// carries is metadata the receiving inbox accepts.
package metadata

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// DefaultMaxBytes bounds metadata when no other limit is configured:
	// room for trace context, baggage and a few IDs.
	DefaultMaxBytes = 64 << 10
	// MaxBytesLimit is the largest object jsonb holds (Size): 2^28 - 1
	// bytes. PostgreSQL refuses more.
	MaxBytesLimit = 1<<28 - 1
)

// Problem is why metadata cannot be stored. Rule is the validation rule name
// the inbox reports (inbox.RuleInvalidUTF8, inbox.RuleNullCharacter,
// inbox.RuleTooLarge).
type Problem struct {
	Rule   string // the rule broken, as the inbox names it
	Detail string // what is wrong, for the error message
}

// Size is the size of md's jsonb object, which jsonb's limit applies to: a
// 4-byte header, two 4-byte entries per key and value pair, and the UTF-8
// bytes of every key and value, without JSON quotes or escapes.
func Size(md map[string]string) int {
	n := 4
	for k, v := range md {
		n += 8 + len(k) + len(v)
	}
	return n
}

// Encode is EncodeMax with DefaultMaxBytes.
func Encode(md map[string]string) (string, *Problem) { return EncodeMax(md, DefaultMaxBytes) }

// EncodeMax returns md as a JSON object (encoding/json sorts the keys), or
// the problem of metadata jsonb cannot store or larger than maxBytes (see
// Size; at most MaxBytesLimit counts).
func EncodeMax(md map[string]string, maxBytes int) (string, *Problem) {
	if len(md) == 0 {
		return "{}", nil
	}
	maxBytes = min(maxBytes, MaxBytesLimit)
	// Sized before anything reads the strings: a huge value fails at once.
	if n := Size(md); n > maxBytes {
		return "", &Problem{Rule: "too_large", Detail: fmt.Sprintf("%d bytes as jsonb stores it (8 per entry, keys and values unescaped); the limit is %d: move large data into the payload", n, maxBytes)}
	}
	for k, v := range md {
		for _, s := range [2]string{k, v} {
			if !utf8.ValidString(s) {
				return "", &Problem{Rule: "invalid_utf8", Detail: fmt.Sprintf("key %s: invalid UTF-8", quoteKey(k))}
			}
			if strings.IndexByte(s, 0) >= 0 {
				return "", &Problem{Rule: "null_character", Detail: fmt.Sprintf("key %s: PostgreSQL jsonb cannot store U+0000", quoteKey(k))}
			}
		}
	}
	b, err := json.Marshal(md)
	if err != nil {
		// A map of valid UTF-8 strings always encodes.
		return "", &Problem{Rule: "invalid_utf8", Detail: err.Error()}
	}
	return string(b), nil
}

// quoteKey quotes a key for an error, cut short: keys may be as large as the
// limit allows.
func quoteKey(k string) string {
	const max = 64
	if len(k) <= max {
		return fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("%q... (%d bytes)", k[:max], len(k))
}
