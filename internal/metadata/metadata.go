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

// Problem is why metadata cannot be stored. Rule is the validation rule name
// the inbox reports (inbox.RuleInvalidUTF8, inbox.RuleNullCharacter).
type Problem struct {
	Rule   string
	Detail string
}

// Encode returns md as a JSON object (encoding/json sorts the keys), or the
// problem of an entry jsonb cannot store.
func Encode(md map[string]string) (string, *Problem) {
	if len(md) == 0 {
		return "{}", nil
	}
	for k, v := range md {
		for _, s := range [2]string{k, v} {
			if !utf8.ValidString(s) {
				return "", &Problem{Rule: "invalid_utf8", Detail: fmt.Sprintf("key %q: invalid UTF-8", k)}
			}
			if strings.IndexByte(s, 0) >= 0 {
				return "", &Problem{Rule: "null_character", Detail: fmt.Sprintf("key %q: PostgreSQL jsonb cannot store U+0000", k)}
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
