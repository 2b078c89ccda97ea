package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
)

// CSRF protection has two independent layers, so neither alone has to be
// perfect:
//
//  1. http.CrossOriginProtection refuses a POST that a browser marks as
//     cross-origin (Sec-Fetch-Site, or an Origin that is not the Host).
//  2. A double-submit token: a random value in a SameSite=Strict, HttpOnly
//     cookie that every form repeats in a hidden field. A cross-site page can
//     neither read the cookie nor make the browser send it.
//
// Both are stateless, so the console runs on several replicas without a
// session store. The token travels only in the cookie and in POST bodies,
// never in a URL.
const (
	csrfCookie = "pginbox_console_csrf"
	csrfField  = "csrf"
	csrfBytes  = 32
)

var (
	errCrossOrigin = errors.New("the browser marked this request as coming from another site, so it was not carried out. Open the console itself and submit the form there")
	errNoToken     = errors.New("the console's security cookie is missing (cookies blocked, or the session ended). Enable cookies for this site, reload the page and submit again")
	errBadToken    = errors.New("the form's security token is missing or does not match this browser's: the form may be from an old page. Reload the page and submit again")
)

// csrfToken returns the browser's token, issuing one when it has none.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && wellFormedToken(c.Value) {
		return c.Value
	}
	b := make([]byte, csrfBytes)
	rand.Read(b) // never fails (crypto/rand)
	tok := base64.RawURLEncoding.EncodeToString(b)
	path := h.cfg.Prefix
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{
		Name:     csrfCookie,
		Value:    tok,
		Path:     path,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	})
	return tok
}

func wellFormedToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == csrfBytes
}

// checkCSRF verifies a POST and returns its token.
func (h *handler) checkCSRF(r *http.Request) (string, error) {
	if err := h.origin.Check(r); err != nil {
		return "", errCrossOrigin
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !wellFormedToken(c.Value) {
		return "", errNoToken
	}
	field := r.PostFormValue(csrfField)
	if subtle.ConstantTimeCompare([]byte(field), []byte(c.Value)) != 1 {
		return "", errBadToken
	}
	return c.Value, nil
}
