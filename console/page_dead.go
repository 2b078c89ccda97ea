package console

import (
	"net/http"
	"strings"

	"github.com/pginbox/pginbox/inbox"
)

type deadData struct {
	Consumer string
	Result   *inbox.DeadGroupsResult
	Total    int64
}

// dead shows the DEAD receipts grouped by consumer and last error, largest
// group first: what to fix first.
func (h *handler) dead(w http.ResponseWriter, r *http.Request, s *session) {
	consumer := strings.TrimSpace(r.URL.Query().Get("consumer"))
	res, err := s.view.DeadGroups(r.Context(), inbox.DeadGroupsParams{Consumer: consumer})
	if err != nil {
		h.fail(w, r, s, "dead groups", err)
		return
	}
	d := deadData{Consumer: consumer, Result: res}
	for _, g := range res.Groups {
		d.Total += g.Count
	}
	p := h.newPage(s, "Dead receipts", "dead")
	p.Data = d
	h.render(w, r, http.StatusOK, "dead", p)
}
