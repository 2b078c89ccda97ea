package webhook

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Handler is an http.Handler that verifies signed webhooks and accepts them
// into the inbox. It is safe for concurrent use.
type Handler struct {
	acc  Accepter
	cfg  Config
	keys map[string]Key

	acked, rejected, retries atomic.Int64
}

// Stats counts what a Handler answered since it was created.
type Stats struct {
	Acked    int64 // 2xx after Accept (accepted or duplicate)
	Rejected int64 // 4xx: unsigned, stale, malformed, invalid or conflicting requests, which a retry as sent cannot fix
	Retries  int64 // 503: Accept failed and the event was not stored; the sender sends it again
}

// Stats returns the handler's counters.
func (h *Handler) Stats() Stats {
	return Stats{Acked: h.acked.Load(), Rejected: h.rejected.Load(), Retries: h.retries.Load()}
}

// NewHandler returns a Handler that accepts through acc (an *inbox.Client).
func NewHandler(acc Accepter, cfg Config) (*Handler, error) {
	cfg, err := cfgerr.Prepare("pginbox/webhook: NewHandler", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	h := &Handler{acc: acc, cfg: cfg, keys: make(map[string]Key, len(cfg.Keys))}
	for _, k := range cfg.Keys {
		h.keys[k.ID] = k
	}
	return h, nil
}

// ServeHTTP verifies, decodes and accepts one webhook. See the package
// documentation for the status codes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "send webhooks with POST")
		return
	}
	key, ok := h.keys[r.Header.Get(HeaderKeyID)]
	if !ok {
		h.refuse(w, r, http.StatusUnauthorized, "unauthorized", "unknown or missing "+HeaderKeyID+" header: sign with a key this endpoint knows")
		return
	}
	tsText := r.Header.Get(HeaderTimestamp)
	ts, ok := parseTimestamp(tsText)
	if !ok {
		h.refuse(w, r, http.StatusUnauthorized, "unauthorized", HeaderTimestamp+" header missing or not unix seconds")
		return
	}
	if skew := time.Since(ts); skew > h.cfg.Tolerance || skew < -h.cfg.Tolerance {
		h.refuse(w, r, http.StatusUnauthorized, "unauthorized",
			fmt.Sprintf("%s is %v away from the server's clock (tolerance %v): replays are refused; sign each attempt with the current time", HeaderTimestamp, skew.Round(time.Second), h.cfg.Tolerance))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body larger than %d bytes", h.cfg.MaxBodyBytes))
			return
		}
		h.refuse(w, r, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	idemKey := r.Header.Get(HeaderIdempotencyKey)
	if !verifySignature(r.Header.Get(HeaderSignature), key.Secret, tsText, idemKey, body) {
		h.refuse(w, r, http.StatusUnauthorized, "unauthorized", "signature does not match: sign timestamp, Idempotency-Key and the exact body with the key's secret")
		return
	}
	if h.cfg.IdempotencyKey && idemKey == "" {
		h.refuse(w, r, http.StatusBadRequest, "bad_request", HeaderIdempotencyKey+" header is required: send the same key on every retry of one event")
		return
	}

	msg, err := h.cfg.Decode(body, r.Header)
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, "bad_request", "decoding the body: "+err.Error())
		return
	}
	msg.Scope = key.Scope
	msg.Metadata = h.headerMetadata(r.Header, msg.Metadata)
	if h.cfg.IdempotencyKey {
		msg.MessageID = idemKey
	}
	res, err := h.acc.Accept(r.Context(), msg)
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		h.acked.Add(1)
		status := http.StatusAccepted
		if res.Outcome == inbox.Duplicate {
			status = http.StatusOK
		}
		writeJSON(w, status, acceptedBody{Outcome: string(res.Outcome), Receipt: res.ID.String(), Status: string(res.Status)})
	case inbox.ActionReject:
		if errors.Is(err, inbox.ErrIdentityConflict) {
			h.refuse(w, r, http.StatusConflict, "conflict", err.Error())
			return
		}
		h.refuse(w, r, http.StatusUnprocessableEntity, "invalid", err.Error())
	default:
		h.retries.Add(1)
		h.cfg.Logger.WarnContext(r.Context(), "pginbox/webhook: accept failed, answering 503", "key", key.ID, "message_id", msg.MessageID, "err", err)
		secs := int((h.cfg.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: "unavailable", Error: "the event was not stored: send it again later"})
	}
}

// refuse answers a request that is not accepted, and logs it at Debug (a
// sender's mistakes are not the receiver's errors).
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	h.rejected.Add(1)
	h.cfg.Logger.DebugContext(r.Context(), "pginbox/webhook: refused", "status", status, "code", code, "reason", msg, "remote", r.RemoteAddr)
	writeJSON(w, status, errorBody{Code: code, Error: msg})
}

// headerMetadata adds Config.MetadataHeaders found in hdr to md (a copy),
// leaving keys Decode set alone.
func (h *Handler) headerMetadata(hdr http.Header, md map[string]string) map[string]string {
	var out map[string]string
	for _, name := range h.cfg.MetadataHeaders {
		v := hdr.Get(name)
		key := strings.ToLower(name)
		if v == "" {
			continue
		}
		if _, set := md[key]; set {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(md)+len(h.cfg.MetadataHeaders))
			maps.Copy(out, md)
		}
		out[key] = v
	}
	if out == nil {
		return md
	}
	return out
}
