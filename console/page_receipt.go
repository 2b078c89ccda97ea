package console

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/pginbox/pginbox/inbox"
)

type receiptData struct {
	R *inbox.ReceiptDetails
	// Payload is the pretty-printed payload; empty when purged.
	Payload    string
	CanRequeue bool
	CanReplay  bool
	// CanSkip is set for a DEAD receipt that still holds its ordering key:
	// the key's later receipts wait until it is requeued or skipped.
	CanSkip bool
	// Skipped reports a receipt taken out of its key's order by a skip.
	Skipped bool
	// NoAction says why no action applies.
	NoAction string
	// Reason keeps what the user typed when an action was refused, for the
	// form of ReasonFor.
	Reason    string
	ReasonFor string
}

// notices confirm a finished action after its redirect. The URL names one of
// them; nothing from the URL is shown.
var notices = map[string]string{
	"requeued": "Requeued: the receipt is PENDING again with a fresh retry budget, and listening workers were woken. The audit trail below records it.",
	"replayed": "Replayed: a new PENDING receipt with the same payload was created; it is listed under Replays. The audit trail below records it.",
	"skipped":  "Skipped: the receipt stays DEAD but no longer holds its ordering key, so the key's next receipt runs. A requeue would run it again without order. The audit trail below records it.",
}

// receipt shows one receipt with its payload, metadata, replays and audit
// trail, and the actions that apply to it.
func (h *handler) receipt(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := h.receiptID(w, r, s)
	if !ok {
		return
	}
	p := h.newPage(s, "Receipt "+id.String(), "receipts")
	p.Notice = notices[r.URL.Query().Get("done")]
	h.showReceipt(w, r, s, id, http.StatusOK, p, refusal{})
}

// showReceipt loads and renders a receipt page with code; actions that were
// refused render it with their error.
func (h *handler) showReceipt(w http.ResponseWriter, r *http.Request, s *session, id inbox.ID, code int, p *page, refused refusal) {
	d, err := s.view.Get(r.Context(), id)
	if err != nil {
		h.fail(w, r, s, "receipt", err)
		return
	}
	switch {
	case refused.seen == "":
	case refused.seen != d.Status:
		p.Error += fmt.Sprintf(" Its status changed from %s to %s.", refused.seen, d.Status)
	default:
		p.Error += fmt.Sprintf(" It is still %s, but attempts, error or audit trail may have changed.", d.Status)
	}
	data := receiptData{R: d, Reason: refused.reason, ReasonFor: refused.action}
	if !d.Purged() && len(d.Payload) > 0 {
		data.Payload = prettyJSON(d.Payload)
	}
	if d.OrderingKey != "" {
		// A skip takes the key off the receipt for good (a requeue after it
		// runs without order), so its audit entry says it no longer holds
		// the key.
		data.Skipped = slices.ContainsFunc(d.Audit, func(a inbox.AuditEntry) bool {
			return a.ReceiptID == d.ID && a.Action == inbox.AuditSkip
		})
	}
	switch d.Status {
	case inbox.StatusDead, inbox.StatusRetryable:
		data.CanRequeue = true
		data.CanSkip = d.Status == inbox.StatusDead && d.OrderingKey != "" && !data.Skipped
	case inbox.StatusCompleted:
		if d.Purged() {
			data.NoAction = "It is COMPLETED, but its payload was purged (retention), so it cannot be replayed. Have the producer send the event again under a new message ID."
		} else {
			data.CanReplay = true
		}
	case inbox.StatusPending:
		data.NoAction = "It is PENDING: it waits for a worker. Nothing to requeue or replay."
		if d.Blocked {
			data.NoAction = "It is PENDING behind an earlier receipt of its ordering key, which must complete first (a DEAD one holds the key until it is requeued or skipped: open the DEAD receipts of this consumer and use Requeue or Skip on the one with this key). Nothing to requeue or replay here."
		}
	case inbox.StatusProcessing:
		data.NoAction = "It is PROCESSING: a worker holds it right now. Nothing to requeue or replay."
	}
	p.Data = data
	h.render(w, r, code, "receipt", p)
}

// receiptID reads the {id} path segment; a malformed one is not found.
func (h *handler) receiptID(w http.ResponseWriter, r *http.Request, s *session) (inbox.ID, bool) {
	var id inbox.ID
	if err := id.UnmarshalText([]byte(r.PathValue("id"))); err != nil {
		h.message(w, r, s, http.StatusNotFound, "Receipt not found",
			"That is not a receipt ID: receipt IDs are 26-character ULIDs (as the list shows) or UUIDs.")
		return id, false
	}
	return id, true
}
