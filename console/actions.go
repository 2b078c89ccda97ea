package console

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pginbox/pginbox/inbox"
)

// requeue sends a DEAD or RETRYABLE receipt back to PENDING, at the version
// the page showed.
func (h *handler) requeue(w http.ResponseWriter, r *http.Request, s *session) {
	h.change(w, r, s, "requeue", func(id inbox.ID, p inbox.ChangeParams) ([]any, error) {
		res, err := s.view.Requeue(r.Context(), id, p)
		if err != nil {
			return nil, err
		}
		return []any{"from_status", res.FromStatus, "version", res.Version, "audit_id", res.AuditID}, nil
	})
}

// replay creates a new receipt from a COMPLETED one, at the version the page
// showed.
func (h *handler) replay(w http.ResponseWriter, r *http.Request, s *session) {
	h.change(w, r, s, "replay", func(id inbox.ID, p inbox.ChangeParams) ([]any, error) {
		res, err := s.view.Replay(r.Context(), id, p)
		if err != nil {
			return nil, err
		}
		return []any{"new_receipt_id", res.NewID, "version", res.OriginalVersion, "audit_id", res.AuditID}, nil
	})
}

// skip takes a DEAD receipt out of its ordering key's order, so the key's
// next receipt runs, at the version the page showed. The receipt stays DEAD.
func (h *handler) skip(w http.ResponseWriter, r *http.Request, s *session) {
	h.change(w, r, s, "skip", func(id inbox.ID, p inbox.ChangeParams) ([]any, error) {
		res, err := s.view.Skip(r.Context(), id, p)
		if err != nil {
			return nil, err
		}
		return []any{"ordering_key", res.OrderingKey, "promoted", res.Promoted, "version", res.Version, "audit_id", res.AuditID}, nil
	})
}

// change runs an audited change with the form's version and reason and the
// session's actor. Success redirects to the receipt (so a reload does not
// post again); a refusal shows the receipt's current state with why.
func (h *handler) change(w http.ResponseWriter, r *http.Request, s *session, action string,
	act func(inbox.ID, inbox.ChangeParams) (logAttrs []any, err error)) {
	id, ok := h.receiptID(w, r, s)
	if !ok {
		return
	}
	reason := r.PostFormValue("reason")
	version, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	switch {
	case err != nil || version < 1:
		err = formError("the form carries no valid receipt version: reload the receipt and submit again")
	case strings.TrimSpace(reason) == "":
		err = formError("a reason is required: say why, for the audit trail")
	default:
		var attrs []any
		attrs, err = act(id, inbox.ChangeParams{ExpectedVersion: version, Actor: s.Actor, Reason: reason})
		if err == nil {
			h.log.Info("pginbox console: "+action, append([]any{"receipt_id", id, "actor", s.Actor, "scope", s.Scope.String(), "reason", reason}, attrs...)...)
			done := map[string]string{"requeue": "requeued", "replay": "replayed", "skip": "skipped"}[action]
			http.Redirect(w, r, h.cfg.Prefix+"/receipts/"+id.String()+"?done="+done, http.StatusSeeOther)
			return
		}
		if errors.Is(err, inbox.ErrNotFound) {
			h.fail(w, r, s, action, err)
			return
		}
	}
	code, title, text := describe(err)
	var fe formError
	if errors.As(err, &fe) {
		code, title, text = http.StatusBadRequest, "Nothing changed", upperFirst(string(fe))+"."
	}
	if code >= 500 {
		h.log.Error("pginbox console: "+action, "receipt_id", id, "actor", s.Actor, "err", err)
	}
	p := h.newPage(s, "Receipt "+id.String(), "receipts")
	p.ErrorTitle, p.Error = title, forViewer(s, code, text)
	refused := refusal{action: action, reason: reason}
	if errors.Is(err, inbox.ErrVersionConflict) {
		// The status the page showed, to say what changed. Only a known
		// status is repeated back.
		if st := inbox.Status(r.PostFormValue("status")); slices.Contains(allStatuses, st) {
			refused.seen = st
		}
	}
	h.showReceipt(w, r, s, id, code, p, refused)
}

// refusal is what a refused action leaves for the receipt page: the reason
// the user typed (back in that action's form), and for a version conflict the
// status their page showed.
type refusal struct {
	action string
	reason string
	seen   inbox.Status
}

// formError is a mistake in the submitted form.
type formError string

func (e formError) Error() string { return string(e) }
