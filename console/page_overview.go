package console

import (
	"net/http"

	"github.com/pginbox/pginbox/inbox"
)

type overviewData struct {
	Stats *inbox.Stats
	// Total sums the consumers; its OldestDueAge is the largest.
	Total inbox.ConsumerStats
}

// overview shows the active receipts per consumer and refreshes itself.
func (h *handler) overview(w http.ResponseWriter, r *http.Request, s *session) {
	st, err := s.view.Stats(r.Context(), inbox.StatsParams{})
	if err != nil {
		h.fail(w, r, s, "overview", err)
		return
	}
	d := overviewData{Stats: st}
	for _, c := range st.Consumers {
		d.Total.Pending += c.Pending
		d.Total.Processing += c.Processing
		d.Total.Retryable += c.Retryable
		d.Total.Dead += c.Dead
		d.Total.Due += c.Due
		d.Total.OldestDueAge = max(d.Total.OldestDueAge, c.OldestDueAge)
	}
	p := h.newPage(s, "Overview", "overview")
	p.Refresh = int(h.cfg.RefreshInterval.Seconds())
	p.Data = d
	h.render(w, r, http.StatusOK, "overview", p)
}

// notFound answers every path the console does not have.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request, s *session) {
	h.message(w, r, s, http.StatusNotFound, "Page not found",
		"The console has no page at this address. Start from the overview.")
}
