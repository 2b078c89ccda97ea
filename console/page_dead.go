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

// dead shows the DEAD receipts grouped by consumer and error shape, largest
// group first: what to fix first. Each group lists the exact texts of its
// newest receipts.
func (h *handler) dead(w http.ResponseWriter, r *http.Request, s *session) {
	consumer := strings.TrimSpace(r.URL.Query().Get("consumer"))
	if err := checkName("consumer", consumer); err != nil {
		h.message(w, r, s, http.StatusBadRequest, "Invalid filter", upperFirst(err.Error())+".")
		return
	}
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
