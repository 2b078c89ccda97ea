// Package console is pginbox's web console: an http.Handler that shows
// receipts to the people on call and lets them requeue, replay, skip and
// purge through the admin API. It is server-rendered HTML with embedded
// assets and no dependencies beyond the standard library; every page works
// without JavaScript.
//
//	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
//	...
//	h, err := console.New(admin, console.Config{
//		Prefix: "/inbox",
//		Authenticate: func(r *http.Request) (string, console.Scope, error) {
//			u, err := sessions.User(r) // your application's sign-in
//			if err != nil {
//				return "", console.Scope{}, err
//			}
//			if u.IsOperator {
//				return u.Email, console.AllScopes(), nil
//			}
//			return u.Email, console.Tenant(u.TenantID), nil
//		},
//	})
//	mux.Handle("/inbox/", h)
//
// Every admin call goes through the view of the user's scope, so a tenant's
// user cannot see or change another tenant's receipt, even by ID. Without
// Authenticate the console serves loopback clients only.
package console

import (
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pginbox/pginbox/inbox"
)

// Defaults of Config fields left at their zero value.
const (
	DefaultLocalActor      = "console"
	DefaultRefreshInterval = 5 * time.Second
	DefaultPageSize        = 50
)

// Config configures the console.
type Config struct {
	// Authenticate identifies the user of a request: the actor recorded in the
	// audit trail (a user name or e-mail) and the scope the user may see and
	// change. An error refuses the request with 401 and the error's text, so
	// say what to do ("sign in at /login"). It runs on every request except
	// for the static assets.
	//
	// Defaults to nil: the console then serves loopback clients only (other
	// clients get 403), acts as LocalActor within LocalScope, and says so on
	// every page. Behind a reverse proxy on the same host every client looks
	// local, so requests carrying Forwarded or X-Forwarded-For headers are
	// refused too; set Authenticate to serve anyone but yourself.
	Authenticate func(r *http.Request) (actor string, scope Scope, err error)

	// LocalActor is the actor recorded for actions when Authenticate is nil.
	// Defaults to DefaultLocalActor.
	LocalActor string

	// LocalScope is what loopback clients see when Authenticate is nil.
	// Defaults to AllScopes().
	LocalScope Scope

	// ReadOnly hides every action (requeue, replay, skip, purge) and refuses
	// them with 403. Defaults to false.
	ReadOnly bool

	// Prefix is the URL path the console is mounted at, without a trailing
	// slash, e.g. "/admin/inbox"; mount the handler at Prefix+"/". Defaults to
	// "" (the root).
	Prefix string

	// RefreshInterval is how often the overview refreshes itself. Defaults to
	// DefaultRefreshInterval; between 1s and 1h.
	RefreshInterval time.Duration

	// PageSize is the number of receipts on one page of the list. Defaults to
	// DefaultPageSize; at most inbox.MaxListLimit.
	PageSize int

	// Logger receives a record of every action with its actor, and of
	// requests that failed on the server's side. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.LocalActor == "" && c.Authenticate == nil {
		c.LocalActor = DefaultLocalActor
	}
	if c.LocalScope.IsZero() && c.Authenticate == nil {
		c.LocalScope = AllScopes()
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks a Config after withDefaults.
func (c Config) validate() error {
	if c.Authenticate != nil {
		// The hook names the actor and scope of every request; a local value
		// would be silently ignored.
		if c.LocalActor != "" {
			return errors.New("console: Config.LocalActor applies only without Authenticate (the hook names the actor); remove one of them")
		}
		if !c.LocalScope.IsZero() {
			return errors.New("console: Config.LocalScope applies only without Authenticate (the hook names the scope); remove one of them")
		}
	} else {
		if err := checkActor(c.LocalActor); err != nil {
			return fmt.Errorf("console: Config.LocalActor: %w", err)
		}
		if err := c.LocalScope.check(); err != nil {
			return fmt.Errorf("console: Config.LocalScope: %w", err)
		}
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") ||
		strings.ContainsAny(c.Prefix, "{}?#% ")) {
		return fmt.Errorf("console: Config.Prefix %q: want a path like /admin/inbox: starting with /, no trailing slash, no {}?#%% or spaces", c.Prefix)
	}
	if c.RefreshInterval < time.Second || c.RefreshInterval > time.Hour {
		return fmt.Errorf("console: Config.RefreshInterval %s: must be between 1s and 1h", c.RefreshInterval)
	}
	if c.PageSize < 1 || c.PageSize > inbox.MaxListLimit {
		return fmt.Errorf("console: Config.PageSize %d: must be between 1 and %d", c.PageSize, inbox.MaxListLimit)
	}
	return nil
}

// checkActor applies the audit trail's rule for actors: 1 to 255 bytes of
// text without control characters.
func checkActor(a string) error {
	switch {
	case a == "":
		return errors.New("empty: name who acts, for the audit trail")
	case len(a) > 255:
		return fmt.Errorf("%d bytes: at most 255 allowed", len(a))
	case strings.IndexFunc(a, unicode.IsControl) >= 0:
		return errors.New("contains a control character")
	case !utf8.ValidString(a):
		return errors.New("not valid UTF-8")
	}
	return nil
}

// New returns the console for admin. Every request is answered with a strict
// Content-Security-Policy, no framing, and no caching of pages.
func New(admin *inbox.Admin, cfg Config) (http.Handler, error) {
	if admin == nil {
		return nil, errors.New("console: New: admin is nil; pass the *inbox.Admin from inbox.NewAdmin")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &handler{cfg: cfg, admin: admin, log: cfg.Logger, origin: http.NewCrossOriginProtection()}
	if err := h.loadTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

type handler struct {
	cfg    Config
	admin  *inbox.Admin
	log    *slog.Logger
	origin *http.CrossOriginProtection
	mux    *http.ServeMux
	pages  map[string]*template.Template
}

func (h *handler) routes() {
	p := h.cfg.Prefix
	m := http.NewServeMux()
	m.HandleFunc("GET "+p+"/static/{file}", h.static)
	m.Handle("GET "+p+"/{$}", h.page(h.overview))
	m.Handle("GET "+p+"/receipts", h.page(h.list))
	m.Handle("GET "+p+"/receipts/{id}", h.page(h.receipt))
	m.Handle("POST "+p+"/receipts/{id}/requeue", h.action(h.requeue))
	m.Handle("POST "+p+"/receipts/{id}/replay", h.action(h.replay))
	m.Handle("POST "+p+"/receipts/{id}/skip", h.action(h.skip))
	m.Handle("GET "+p+"/dead", h.page(h.dead))
	m.Handle("GET "+p+"/purge", h.page(h.purgeForm))
	m.Handle("POST "+p+"/purge", h.action(h.purge))
	m.Handle(p+"/", h.page(h.notFound))
	h.mux = m
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	h.mux.ServeHTTP(w, r)
}
