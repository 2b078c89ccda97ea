package doc

import (
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
)

type user struct {
	Email, TenantID string
	Operator        bool
}

// sessions stands for the application's sign-in.
var sessions struct {
	User func(*http.Request) (user, error)
}

func _(pool *pgxpool.Pool, mux *http.ServeMux) {
	//doc:block
	_ = err
}
