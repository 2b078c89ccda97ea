package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pginbox/pginbox/internal/canonjson"
	"github.com/pginbox/pginbox/internal/metadata"
)

// canonicalize validates a payload and returns its canonical JSON (RFC 8785, with
// numbers kept exact).
func canonicalize(payload any, lim canonjson.Limits) ([]byte, error) {
	var raw []byte
	switch v := payload.(type) {
	case []byte:
		raw = v
	case json.RawMessage:
		raw = v
	default:
		var err error
		if raw, err = encodeGoValue(v); err != nil {
			return nil, err
		}
	}
	canon, err := canonjson.Canonicalize(raw, lim)
	if err != nil {
		var cerr *canonjson.Error
		if errors.As(err, &cerr) {
			return nil, &ValidationError{Field: "payload", Rule: Rule(cerr.Rule), Detail: cerr.Error()}
		}
		return nil, &ValidationError{Field: "payload", Rule: RuleInvalidJSON, Detail: err.Error()}
	}
	return canon, nil
}

// encodeGoValue encodes a Go value with encoding/json, turning what it would
// silently coerce or refuse into validation errors.
func encodeGoValue(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		var unsupported *json.UnsupportedValueError
		if errors.As(err, &unsupported) {
			return nil, &ValidationError{Field: "payload", Rule: RuleNonFinite, Detail: fmt.Sprintf("%s: JSON has no NaN or infinity; encode it as a string or null", unsupported.Str)}
		}
		return nil, &ValidationError{Field: "payload", Rule: RuleUnsupportedType, Detail: err.Error()}
	}
	// encoding/json replaces invalid UTF-8 in strings with the escape \ufffd, while a
	// real U+FFFD is written raw, so the escape means the value held invalid UTF-8.
	if i := escapedReplacementChar(raw); i >= 0 {
		return nil, &ValidationError{Field: "payload", Rule: RuleInvalidUTF8, Detail: fmt.Sprintf("a string holds invalid UTF-8 (near byte %d of the encoded payload); pass valid UTF-8 or base64-encode binary data", i)}
	}
	return raw, nil
}

// escapedReplacementChar returns the offset of a `\ufffd` escape that is not itself
// an escaped backslash followed by text, or -1.
func escapedReplacementChar(b []byte) int {
	const esc = `\ufffd`
	off := 0
	for {
		i := bytes.Index(b[off:], []byte(esc))
		if i < 0 {
			return -1
		}
		i += off
		slashes := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			slashes++
		}
		if slashes%2 == 0 {
			return i
		}
		off = i + len(esc)
	}
}

// encodeMetadata stores metadata as a JSON object (keys sorted), refusing what
// jsonb cannot store and more than maxBytes (metadata.Size).
func encodeMetadata(md map[string]string, maxBytes int) (string, error) {
	s, p := metadata.EncodeMax(md, maxBytes)
	if p != nil {
		detail := p.Detail
		if Rule(p.Rule) == RuleTooLarge {
			detail += " or raise Config.MaxMetadataBytes"
		}
		return "", &ValidationError{Field: "metadata", Rule: Rule(p.Rule), Detail: detail}
	}
	return s, nil
}
