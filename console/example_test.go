package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
)

// New mounts the console under /inbox/ of an application's mux, with the
// application's sign-in deciding who acts and which tenant they see.
func ExampleNew() {
	pool, done := examplePool()
	defer done()

	// Stand-in for the application's own session lookup.
	users := map[string]struct {
		tenant   string
		operator bool
	}{"token-alice": {tenant: "acme"}, "token-ops": {operator: true}}

	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		panic(err)
	}
	h, err := console.New(admin, console.Config{
		Prefix: "/inbox",
		Authenticate: func(r *http.Request) (string, console.Scope, error) {
			token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			u, ok := users[token]
			switch {
			case !ok:
				return "", console.Scope{}, errors.New("sign in at /login first")
			case u.operator:
				return "ops@example.com", console.AllScopes(), nil
			}
			return "alice@example.com", console.Tenant(u.tenant), nil
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/inbox/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, token := range []string{"", "token-alice", "token-ops"} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/inbox/", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		scope := "-"
		if i := strings.Index(string(body), "Scope: <strong>"); i >= 0 {
			scope = strings.SplitN(string(body[i+len("Scope: <strong>"):]), "<", 2)[0]
		}
		fmt.Printf("%q: %d, scope %s\n", token, res.StatusCode, scope)
	}
	// Output:
	// "": 401, scope -
	// "token-alice": 200, scope tenant(acme)
	// "token-ops": 200, scope all scopes
}
