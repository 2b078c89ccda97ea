package otelinbox

import (
	"context"
	"errors"
	"reflect"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

// errorClasses are the error.type values of pginbox's sentinel errors and
// the context's, tried in order.
var errorClasses = []struct {
	err  error
	name string
}{
	{inbox.ErrInvalid, OutcomeInvalid},
	{inbox.ErrIdentityConflict, OutcomeConflict},
	{inbox.ErrCommitUncertain, "commit_uncertain"},
	{inbox.ErrLeaseLost, "lease_lost"},
	{inbox.ErrHandlerTimeout, "handler_timeout"},
	{inbox.ErrWorkerShutdown, "worker_shutdown"},
	{inbox.ErrClientClosed, "client_closed"},
	{inbox.ErrScopeMismatch, "scope_mismatch"},
	{inbox.ErrTenancyRestricted, "tenancy_restricted"},
	{handler.ErrTxOwnedByWorker, "tx_owned_by_worker"},
	{outbox.ErrDuplicateEvent, "duplicate_event"},
	{schema.ErrNotMigrated, "not_migrated"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
}

// errorType classifies err for error.type, most specific first: "permanent"
// (handler.Permanent: the receipt or event goes DEAD), a sentinel's class
// (errorClasses), "sqlstate_" and the SQLSTATE of a PostgreSQL error, the
// Go type of the first error in the chain that has a type of its own (a
// custom error type, *net.OpError, ...), or fallback. The values are few,
// so metrics can carry them.
func errorType(err error, fallback string) string {
	if handler.IsPermanent(err) {
		return "permanent"
	}
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "sqlstate_" + pgErr.Code
	}
	if t := namedType(err); t != "" {
		return t
	}
	return fallback
}

// namedType returns the Go type of the first error in err's chain that is
// not one of the standard library's anonymous kinds (errors.New,
// fmt.Errorf, errors.Join), or "".
func namedType(err error) string {
	if err == nil {
		return ""
	}
	t := reflect.TypeOf(err)
	base := t
	if base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if p := base.PkgPath(); p != "errors" && p != "fmt" {
		return t.String()
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return namedType(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if n := namedType(e); n != "" {
				return n
			}
		}
	}
	return ""
}
