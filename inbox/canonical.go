package inbox

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/pginbox/pginbox/internal/canonjson"
)

// Canonicalize validates a payload and returns its canonical JSON, the bytes
// [Client.Accept] fingerprints. A Go producer passes the result to
// [Fingerprint] to compute the fingerprint Accept will, for example to log it
// or compare it with a receipt's.
//
// payload is what Message.Payload holds: []byte or json.RawMessage with JSON
// text, or any other Go value, which is encoded with encoding/json first. The
// rules and limits are Accept's with a default [Config]: depth at most
// [DefaultMaxPayloadDepth], canonical size at most [DefaultMaxPayloadBytes].
// (A client configured with other limits accepts accordingly; the canonical
// form of what both accept is the same.) A payload that breaks a rule is a
// *ValidationError naming it, as from Accept.
//
// The canonical form is RFC 8785 (JSON Canonicalization Scheme) except for
// numbers: they keep their exact decimal value, written in the ES6 layout RFC
// 8785 prescribes, instead of being rounded to the nearest float64 first.
// docs/fingerprint.md in the repository describes it for producers in other
// languages.
func Canonicalize(payload any) ([]byte, error) {
	return canonicalize(payload, canonjson.Limits{MaxDepth: DefaultMaxPayloadDepth, MaxBytes: DefaultMaxPayloadBytes})
}

// fingerprintDomain versions the framing, so a future change cannot collide with it.
const fingerprintDomain = "pginbox.fingerprint.v1\x00"

// Fingerprint returns the SHA-256 content fingerprint of an event: its type,
// schema version and canonical payload (from [Canonicalize]). Two deliveries of
// one identity are duplicates when their fingerprints are equal, and a
// *ConflictError otherwise.
//
// The hash input is, in order and with no separators:
//
//	"pginbox.fingerprint.v1" and one zero byte
//	uvarint(byte length of eventType), eventType as UTF-8
//	uvarint(schemaVersion)
//	uvarint(byte length of canonicalPayload), canonicalPayload
//
// where uvarint is the unsigned LEB128 varint of encoding/binary.PutUvarint
// (7 bits per byte, least significant group first, high bit set on all but
// the last byte). The length prefixes keep two different triples from ever
// sharing an input.
func Fingerprint(eventType string, schemaVersion int, canonicalPayload []byte) [32]byte {
	h := sha256.New()
	var buf [binary.MaxVarintLen64]byte
	h.Write([]byte(fingerprintDomain))
	h.Write(buf[:binary.PutUvarint(buf[:], uint64(len(eventType)))])
	h.Write([]byte(eventType))
	h.Write(buf[:binary.PutUvarint(buf[:], uint64(schemaVersion))])
	h.Write(buf[:binary.PutUvarint(buf[:], uint64(len(canonicalPayload)))])
	h.Write(canonicalPayload)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
