package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/visible"
)

// defaultPurgeAge is what the purge form proposes.
const defaultPurgeAge = "30d"

type purgeData struct {
	OlderThan string
	// DryRun is set once the user asked what a purge would do.
	DryRun bool
	Count  int64
	Cutoff time.Time
	// Done is set after a purge ran.
	Done   bool
	Result inbox.PurgeResult
}

// CutoffValue is the cutoff as the confirm form posts it back, so the purge
// uses exactly the cutoff the dry run counted.
func (d purgeData) CutoffValue() string { return d.Cutoff.UTC().Format(time.RFC3339Nano) }

// purgeForm asks for the retention age and, once given, shows a dry run: how
// many payloads a purge would drop and the cutoff, with a confirm button.
func (h *handler) purgeForm(w http.ResponseWriter, r *http.Request, s *session) {
	p := h.newPage(s, "Purge payloads", "purge")
	d := purgeData{OlderThan: strings.TrimSpace(r.URL.Query().Get("older_than"))}
	p.Data = d
	if d.OlderThan == "" {
		d.OlderThan = defaultPurgeAge
		p.Data = d
		h.render(w, r, http.StatusOK, "purge", p)
		return
	}
	age, err := parseAge(d.OlderThan)
	if err != nil {
		p.ErrorTitle, p.Error = "Invalid age", "Older than "+echo(d.OlderThan)+": "+err.Error()+"."
		d.OlderThan = visible.String(d.OlderThan)
		p.Data = d
		h.render(w, r, http.StatusBadRequest, "purge", p)
		return
	}
	n, cutoff, err := s.view.PurgeCount(r.Context(), inbox.PurgeParams{OlderThan: age})
	if err != nil {
		h.fail(w, r, s, "purge dry run", err)
		return
	}
	d.DryRun, d.Count, d.Cutoff = true, n, cutoff
	p.Data = d
	h.render(w, r, http.StatusOK, "purge", p)
}

// purge drops the payloads the dry run counted: COMPLETED receipts completed
// before the posted cutoff, in the user's scope. It runs in batches within
// the request; an interrupted request keeps the finished batches.
func (h *handler) purge(w http.ResponseWriter, r *http.Request, s *session) {
	p := h.newPage(s, "Purge payloads", "purge")
	d := purgeData{OlderThan: r.PostFormValue("older_than")}
	cutoff, err := time.Parse(time.RFC3339Nano, r.PostFormValue("cutoff"))
	if err != nil || cutoff.After(p.Now) {
		p.ErrorTitle, p.Error = "Nothing purged", "The form carries no valid cutoff in the past. Run the dry run again and confirm from its page."
		if d.OlderThan == "" {
			d.OlderThan = defaultPurgeAge
		}
		p.Data = d
		h.render(w, r, http.StatusBadRequest, "purge", p)
		return
	}
	res, err := s.view.Purge(r.Context(), inbox.PurgeParams{Before: cutoff})
	h.log.Info("pginbox console: purge", "actor", s.Actor, "scope", s.Scope.String(), "cutoff", cutoff,
		"purged", res.Purged, "batches", res.Batches, "err", err)
	if err != nil {
		code, title, text := describe(err)
		if res.Purged > 0 {
			text += fmt.Sprintf(" %d payloads were purged before that, in %d batches; run the purge again to finish.", res.Purged, res.Batches)
		}
		if code >= 500 {
			h.log.Error("pginbox console: purge", "err", err, "actor", s.Actor)
		}
		h.message(w, r, s, code, title, forViewer(s, code, text))
		return
	}
	d.Done, d.Result, d.Cutoff = true, res, cutoff
	p.Data = d
	h.render(w, r, http.StatusOK, "purge", p)
}
