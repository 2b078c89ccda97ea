package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/visible"
)

// allStatuses is the order statuses are offered in the list's filter.
var allStatuses = []inbox.Status{inbox.StatusPending, inbox.StatusProcessing, inbox.StatusRetryable, inbox.StatusDead, inbox.StatusCompleted}

// listForm is the list's filter form as the user filled it in.
type listForm struct {
	Statuses []inbox.Status
	Consumer string
	Source   string
	Since    string
	Until    string
}

// Checked reports whether status s is ticked.
func (f listForm) Checked(s inbox.Status) bool { return slices.Contains(f.Statuses, s) }

// Query is the form as URL parameters, for paging links.
func (f listForm) Query() []string {
	var kv []string
	for _, s := range f.Statuses {
		kv = append(kv, "status", string(s))
	}
	return append(kv, "consumer", f.Consumer, "source", f.Source, "since", f.Since, "until", f.Until)
}

type listData struct {
	Form      listForm
	Statuses  []inbox.Status
	Page      *inbox.ListResult
	ShowScope bool
	After     string // the cursor of this page; empty on the first
}

// With is the query of this filter plus extra parameters.
func (d listData) With(kv ...string) []string { return append(d.Form.Query(), kv...) }

// list shows one page of receipts with the CLI's filters (status, consumer,
// source, creation time) and keyset paging.
func (h *handler) list(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := listData{Statuses: allStatuses, ShowScope: s.Scope.kind != scopeTenant && s.Scope.kind != scopeGlobal}
	p := h.newPage(s, "Receipts", "receipts")
	params, form, err := parseListQuery(q, p.Now, h.cfg.PageSize)
	d.Form = form
	p.Data = d
	if err != nil {
		p.ErrorTitle, p.Error = "Invalid filter", err.Error()
		h.render(w, r, http.StatusBadRequest, "list", p)
		return
	}
	page, err := s.view.List(r.Context(), params)
	if err != nil {
		h.fail(w, r, s, "list", err)
		return
	}
	d.Page = page
	if !params.After.IsZero() {
		d.After = params.After.String()
	}
	p.Data = d
	h.render(w, r, http.StatusOK, "list", p)
}

// parseListQuery reads the list's URL parameters. Errors name the field and
// the accepted forms.
func parseListQuery(q url.Values, now time.Time, pageSize int) (inbox.ListParams, listForm, error) {
	f := listForm{
		Consumer: strings.TrimSpace(q.Get("consumer")),
		Source:   strings.TrimSpace(q.Get("source")),
		Since:    strings.TrimSpace(q.Get("since")),
		Until:    strings.TrimSpace(q.Get("until")),
	}
	p := inbox.ListParams{Consumer: f.Consumer, Source: f.Source, Limit: pageSize}
	var errs []error
	// A refused name goes back into the form escaped: the raw bytes cannot
	// be shown, and resubmitting the escape finds nothing, harmlessly.
	if err := checkName("consumer", f.Consumer); err != nil {
		errs = append(errs, err)
		f.Consumer = visible.String(f.Consumer)
	}
	if err := checkName("source", f.Source); err != nil {
		errs = append(errs, err)
		f.Source = visible.String(f.Source)
	}
	for _, v := range q["status"] {
		st := inbox.Status(strings.ToUpper(strings.TrimSpace(v)))
		if !slices.Contains(allStatuses, st) {
			errs = append(errs, fmt.Errorf("status %s: want PENDING, PROCESSING, RETRYABLE, DEAD or COMPLETED", echo(v)))
			continue
		}
		if !slices.Contains(f.Statuses, st) {
			f.Statuses = append(f.Statuses, st)
		}
	}
	p.Statuses = f.Statuses
	var err error
	if f.Since != "" {
		if p.CreatedAfter, err = parseTime(f.Since, now); err != nil {
			errs = append(errs, fmt.Errorf("created since %s: %w", echo(f.Since), err))
			f.Since = visible.String(f.Since)
		}
	}
	if f.Until != "" {
		if p.CreatedBefore, err = parseTime(f.Until, now); err != nil {
			errs = append(errs, fmt.Errorf("created before %s: %w", echo(f.Until), err))
			f.Until = visible.String(f.Until)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > inbox.MaxListLimit {
			errs = append(errs, fmt.Errorf("limit %s: want 1 to %d", echo(v), inbox.MaxListLimit))
		} else {
			p.Limit = n
		}
	}
	if v := q.Get("after"); v != "" {
		if err := p.After.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("after %s: not a receipt ID; use the list's own “Next page” link", echo(v)))
		}
	}
	return p, f, errors.Join(errs...)
}

// checkName refuses a name filter that no identity can have (invalid UTF-8, a
// control character such as NUL, more than 255 bytes): PostgreSQL cannot
// compare such text, and the user learns what is wrong with the input instead
// of a database error.
func checkName(field, v string) error {
	if v == "" {
		return nil
	}
	if rule, detail := inboxtype.CheckIdentityString(v); rule != "" {
		if rule == inboxtype.IdentityTooLong {
			detail = fmt.Sprintf("at most %d allowed", inboxtype.MaxIdentityBytes) // echo cut it and says how long
		}
		return fmt.Errorf("%s %s: %s; a %s is UTF-8 text without control characters, at most %d bytes", field, echo(v), detail, field, inboxtype.MaxIdentityBytes)
	}
	return nil
}

// parseTime reads a point in time as the CLI's --since does: RFC 3339, a
// date (UTC), or an age (90m, 24h, 7d: that long ago).
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("want a time like 2024-05-01T12:00:00Z, a date like 2024-05-01 (UTC), or an age like 90m, 24h or 7d")
}

// parseAge reads a positive age: a Go duration (90m, 24h) or whole days (7d).
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n > 0 && n <= 100_000 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
		return 0, errors.New("want whole days like 30d")
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive age like 90m, 24h or 30d")
	}
	return d, nil
}
