package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
)

//go:embed templates
var templateFS embed.FS

// pageNames are the templates in templates/ besides the layout.
var pageNames = []string{"overview", "list", "receipt", "dead", "purge", "message"}

func (h *handler) loadTemplates() error {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return fmt.Errorf("console: templates: %w", err)
	}
	h.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(templateFS, "templates/"+name+".html")
		}
		if err != nil {
			return fmt.Errorf("console: templates: %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// page is what the layout and every page template get.
type page struct {
	h        *handler
	Title    string
	Nav      string // the active navigation entry
	Session  *session
	Local    bool // no Authenticate hook: loopback clients only
	ReadOnly bool
	Now      time.Time
	Refresh  int    // seconds; 0: the page does not refresh itself
	Notice   string // a confirmation of what was just done
	// ErrorTitle and Error say why the last action or this page failed.
	ErrorTitle string
	Error      string
	Data       any
}

func (h *handler) newPage(s *session, title, nav string) *page {
	return &page{h: h, Title: title, Nav: nav, Session: s, Local: h.cfg.Authenticate == nil,
		ReadOnly: h.cfg.ReadOnly, Now: time.Now()}
}

// URL is the console's URL of path with query parameters given as
// alternating keys and values, strings or []string (flattened); empty values
// are left out.
func (p *page) URL(path string, args ...any) string {
	var kv []string
	for _, a := range args {
		switch v := a.(type) {
		case string:
			kv = append(kv, v)
		case []string:
			kv = append(kv, v...)
		default:
			kv = append(kv, fmt.Sprint(v))
		}
	}
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Add(kv[i], kv[i+1])
		}
	}
	u := p.h.cfg.Prefix + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// Asset is the URL of a static file.
func (p *page) Asset(name string) string { return p.h.assetURL(name) }

// CSRF is the token a form posts back.
func (p *page) CSRF() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.csrf
}

// render executes a page template fully before writing anything, so a
// template error becomes a clean 500 instead of half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, code int, name string, p *page) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("pginbox console: rendering a page", "page", name, "err", err)
		http.Error(w, "pginbox console: the page could not be rendered; the server log has the details", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
}

// message renders a page that only says something: a refusal or an error.
func (h *handler) message(w http.ResponseWriter, r *http.Request, s *session, code int, title, text string) {
	p := h.newPage(s, title, "")
	p.Error = text
	h.render(w, r, code, "message", p)
}

// fail answers a request whose admin call failed, with what to do about it.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, s *session, what string, err error) {
	code, title, text := describe(err)
	if code >= 500 && !errors.Is(err, context.Canceled) {
		h.log.Error("pginbox console: "+what, "err", err, "actor", s.Actor, "scope", s.Scope.String())
	}
	h.message(w, r, s, code, title, forViewer(s, code, text))
}

// forViewer keeps server-side error details (host, database, role names)
// from users of one tenant or of the global scope; operators of every scope
// see them, to fix the cause.
func forViewer(s *session, code int, text string) string {
	if code < 500 || (s != nil && s.Scope.kind == scopeAll) {
		return text
	}
	return "The console could not reach its database; the details are in the server's log. Try again in a moment, or tell your operators."
}

// describe maps an admin error to a status code, a title and a text that
// says what to do.
func describe(err error) (code int, title, text string) {
	msg := strings.TrimPrefix(err.Error(), "pginbox: ")
	var vc *inbox.VersionConflictError
	switch {
	case errors.As(err, &vc):
		return http.StatusConflict, "Nothing changed: the receipt changed meanwhile",
			fmt.Sprintf("You acted on version %d of this receipt, but it is now at version %d: something (a worker or another operator) changed it after your page was loaded. "+
				"Its current state is shown here; check the status, attempts and audit trail, then %s again if it still applies.",
				vc.Expected, vc.Current, vc.Action)
	case errors.Is(err, inbox.ErrWrongState), errors.Is(err, inbox.ErrPayloadPurged):
		return http.StatusConflict, "Nothing changed", upperFirst(msg) + "."
	case errors.Is(err, inbox.ErrNotFound):
		return http.StatusNotFound, "Receipt not found",
			upperFirst(msg) + ". Check the ID; a receipt outside your scope is not found either."
	case errors.Is(err, inbox.ErrInvalid):
		return http.StatusBadRequest, "Invalid request", upperFirst(msg) + "."
	case errors.Is(err, inbox.ErrTenancyRestricted):
		return http.StatusForbidden, "Row-level security hides the other scopes",
			"This console shows every scope, but its database role sees only the scope a transaction sets (tenancy is enabled and the role has no BYPASSRLS). " +
				"Start it for one scope (`inbox console --tenant ID` or `--global`; embedded: an Authenticate hook that gives each user a tenant), " +
				"or connect it as a role with BYPASSRLS (`inbox tenancy grant ROLE --system`, set as AdminConfig.SystemPool)."
	case errors.Is(err, schema.ErrNotMigrated):
		return http.StatusServiceUnavailable, "Schema not migrated",
			upperFirst(msg) + ". Run `inbox migrate up` against this database."
	}
	return http.StatusInternalServerError, "The database call failed",
		upperFirst(msg) + ". Check that PostgreSQL is reachable, then reload the page."
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
