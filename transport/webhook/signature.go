package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request headers.
const (
	HeaderKeyID          = "Webhook-Key-Id"
	HeaderTimestamp      = "Webhook-Timestamp" // unix seconds
	HeaderSignature      = "Webhook-Signature" // "v1=" + hex HMAC-SHA256
	HeaderIdempotencyKey = "Idempotency-Key"
)

const signaturePrefix = "v1="

// Sign sets the key ID, timestamp and signature headers of a request with
// body, as a sender does. Set any Idempotency-Key header on h first: it is
// covered by the signature.
func Sign(h http.Header, keyID string, secret []byte, now time.Time, body []byte) {
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(HeaderKeyID, keyID)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, signaturePrefix+hex.EncodeToString(mac(secret, ts, h.Get(HeaderIdempotencyKey), body)))
}

// mac is HMAC-SHA256 over timestamp, idempotency key and body, separated by
// newlines (which neither the timestamp's digits nor a header value contain,
// so no two different requests sign the same bytes).
func mac(secret []byte, ts, idempotencyKey string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'\n'})
	m.Write([]byte(idempotencyKey))
	m.Write([]byte{'\n'})
	m.Write(body)
	return m.Sum(nil)
}

// verifySignature reports whether header is a valid signature. hmac.Equal
// compares in constant time.
func verifySignature(header string, secret []byte, ts, idempotencyKey string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, mac(secret, ts, idempotencyKey, body))
}

// parseTimestamp reads unix seconds.
func parseTimestamp(s string) (time.Time, bool) {
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec <= 0 {
		return time.Time{}, false
	}
	return time.Unix(sec, 0), true
}
