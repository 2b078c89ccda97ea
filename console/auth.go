package console

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/pginbox/pginbox/inbox"
)

// session is who asks and what they may see, for one request.
type session struct {
	Actor string
	Scope Scope
	view  *inbox.AdminView
	csrf  string // the token forms carry back; never put in a URL
}

// handlerFunc is a page or action handler of an authenticated request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, s *session)

// page wraps a handler of a safe (GET) request: it authenticates and makes
// sure the browser holds a CSRF token for the forms the page shows.
func (h *handler) page(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := h.authenticate(w, r)
		if s == nil {
			return
		}
		s.csrf = h.csrfToken(w, r)
		fn(w, r, s)
	})
}

// action wraps a handler of a state-changing (POST) request: it
// authenticates, refuses in read-only mode and checks the request's origin
// and CSRF token before fn runs.
func (h *handler) action(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := h.authenticate(w, r)
		if s == nil {
			return
		}
		if h.cfg.ReadOnly {
			h.message(w, r, s, http.StatusForbidden, "Read-only console",
				"This console is read-only (Config.ReadOnly, or inbox console --read-only): requeue, replay, skip and purge are disabled. Use a console without read-only mode, or the inbox CLI.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			h.message(w, r, s, http.StatusBadRequest, "Form not readable",
				"The submitted form could not be read ("+err.Error()+"). Forms are at most 64 KiB; reload the page and submit again.")
			return
		}
		tok, err := h.checkCSRF(r)
		if err != nil {
			h.message(w, r, s, http.StatusForbidden, "Request refused", err.Error())
			return
		}
		s.csrf = tok
		fn(w, r, s)
	})
}

// maxFormBytes bounds a POST body; the largest field is a reason of at most
// inbox.MaxReasonBytes.
const maxFormBytes = 64 << 10

// authenticate returns the request's session, or answers the request with a
// refusal and returns nil.
func (h *handler) authenticate(w http.ResponseWriter, r *http.Request) *session {
	if h.cfg.Authenticate == nil {
		if !isLoopback(r.RemoteAddr) {
			h.message(w, r, nil, http.StatusForbidden, "Loopback clients only",
				"This console has no authentication configured, so it serves only clients on the same machine (127.0.0.1 or ::1). "+
					"To reach it from elsewhere, embed it with Config.Authenticate set, or use an SSH tunnel to a loopback address.")
			return nil
		}
		if forwarded(r) {
			h.message(w, r, nil, http.StatusForbidden, "Proxied request refused",
				"This request came through a proxy (it carries a Forwarded or X-Forwarded-For header), so its client may not be on this machine. "+
					"A console without authentication serves direct loopback clients only: configure Config.Authenticate to serve it through a proxy.")
			return nil
		}
		return &session{Actor: h.cfg.LocalActor, Scope: h.cfg.LocalScope, view: h.cfg.LocalScope.view(h.admin)}
	}
	actor, scope, err := h.cfg.Authenticate(r)
	if err != nil {
		h.message(w, r, nil, http.StatusUnauthorized, "Not signed in", err.Error())
		return nil
	}
	if err := checkActor(actor); err != nil {
		h.log.Error("pginbox console: Authenticate returned an invalid actor", "err", err, "path", r.URL.Path)
		h.message(w, r, nil, http.StatusInternalServerError, "Authentication hook error",
			"Config.Authenticate returned no error but an invalid actor ("+err.Error()+"). It must name who acts, for the audit trail, or return an error.")
		return nil
	}
	if err := scope.check(); err != nil {
		h.log.Error("pginbox console: Authenticate returned an invalid scope", "err", err, "actor", actor, "path", r.URL.Path)
		h.message(w, r, nil, http.StatusInternalServerError, "Authentication hook error",
			"Config.Authenticate returned no error but "+err.Error()+". Nothing is shown rather than too much.")
		return nil
	}
	return &session{Actor: actor, Scope: scope, view: scope.view(h.admin)}
}

// isLoopback reports whether a request's RemoteAddr is a loopback address.
func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// forwarded reports whether a proxy relayed the request.
func forwarded(r *http.Request) bool {
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"} {
		if r.Header.Get(k) != "" {
			return true
		}
	}
	return false
}
