package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/driver"
)

// Defaults and limits of the admin API.
const (
	DefaultListLimit      = 100
	MaxListLimit          = 1000
	DefaultPurgeBatchSize = 1000
	MaxPurgeBatchSize     = 100_000
)

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Logger receives a record of every requeue and purge, after it commits.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Admin inspects and repairs the outbox: stats, list, get, requeue DEAD
// events, purge published history. It works across scopes: give it to
// operators, and with row-level security enabled (schema.EnableTenancy) a
// pool whose role has BYPASSRLS, or it sees no event.
type Admin struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// scope, when set (ForScope), limits Get and Requeue to one scope's
	// events: on Citus they then run on that scope's node alone.
	scope *inbox.Scope
	drv   *driver.Lazy // the layout's driver, probed at first use
}

// ForScope returns an Admin whose Get and Requeue see the events of scope s
// only (an event of another scope is ErrNotFound). On Citus they then run
// on the scope's node alone; without a scope, Get reads every shard, and
// Requeue reads the event's scope first. List, Stats and Purge still cover
// every scope.
func (a *Admin) ForScope(s inbox.Scope) *Admin {
	b := *a
	b.scope = &s
	return &b
}

// checkScope refuses a scope no event can have.
func (a *Admin) checkScope() error {
	switch s := a.scope; {
	case s == nil, s.Kind == inbox.ScopeGlobal && s.ID == "":
		return nil
	case s.Kind == inbox.ScopeTenant && s.ID != "":
		return checkString("scope.id", s.ID)
	default:
		return &inbox.ValidationError{Field: "scope", Rule: inbox.RuleOutOfRange,
			Detail: fmt.Sprintf("%s: a tenant with an ID (inbox.Tenant) or the global scope (inbox.Global)", *s)}
	}
}

// getParams is the scope filter of OutboxGet.
func (a *Admin) getParams(id ID) db.OutboxGetParams {
	if a.scope == nil {
		return db.OutboxGetParams{ID: id, AllScopes: true}
	}
	return db.OutboxGetParams{ID: id, ScopeKind: string(a.scope.Kind), ScopeID: a.scope.ID}
}

// NewAdmin returns an Admin on pool. It does not touch the database; the
// first call reports a missing schema.
func NewAdmin(pool *pgxpool.Pool, cfg AdminConfig) (*Admin, error) {
	if pool == nil {
		return nil, errors.New("pginbox: outbox.NewAdmin: pool is nil: pass a *pgxpool.Pool from pgxpool.New")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Admin{pool: pool, log: cfg.Logger, drv: &driver.Lazy{Log: cfg.Logger}}, nil
}

// EventRow is a stored event as the admin API shows it.
type EventRow struct {
	ID ID // the event's stable ID
	// Seq is the emit order (per ordering key, the publish order).
	Seq           int64
	Source        string // the emitting service
	Destination   string // where a relay publishes it
	OrderingKey   string // "" for none
	EventType     string // with SchemaVersion, the payload's shape
	SchemaVersion int    // the payload's schema version
	// Payload and Metadata are loaded by Get only.
	Payload  json.RawMessage
	Metadata map[string]string

	Status   Status // PENDING, PUBLISHING, PUBLISHED or DEAD
	Attempts int    // publish attempts started
	// AvailableAt is when a PENDING event is (or was) due.
	AvailableAt    time.Time
	LeaseExpiresAt *time.Time // while PUBLISHING: when recovery may take it back
	LastError      string     // the last failed attempt's error; "" for none
	// Version grows with every change; Requeue takes it as the expected
	// version.
	Version     int64
	CreatedAt   time.Time  // when the emitting transaction wrote it
	UpdatedAt   time.Time  // its last change
	PublishedAt *time.Time // nil until PUBLISHED
}

// Get returns one event with its payload and metadata, or ErrNotFound.
func (a *Admin) Get(ctx context.Context, id ID) (*EventRow, error) {
	if err := a.checkScope(); err != nil {
		return nil, err
	}
	row, err := db.New(a.pool).OutboxGet(ctx, a.getParams(id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, dbError("outbox get", err)
	}
	ev := eventFromRow(db.OutboxListRow{
		ID: row.ID, Seq: row.Seq, Source: row.Source, Destination: row.Destination, OrderingKey: row.OrderingKey,
		EventType: row.EventType, SchemaVersion: row.SchemaVersion, Status: row.Status, Attempts: row.Attempts,
		AvailableAt: row.AvailableAt, LeaseExpiresAt: row.LeaseExpiresAt, LastError: row.LastError,
		Version: row.Version, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, PublishedAt: row.PublishedAt,
	})
	ev.Payload = json.RawMessage(row.Payload)
	if row.Metadata != "{}" {
		if err := json.Unmarshal([]byte(row.Metadata), &ev.Metadata); err != nil {
			return nil, fmt.Errorf("pginbox: outbox get: decoding metadata: %w", err)
		}
	}
	return &ev, nil
}

func eventFromRow(r db.OutboxListRow) EventRow {
	ev := EventRow{
		ID: r.ID, Seq: r.Seq, Source: r.Source, Destination: r.Destination, OrderingKey: r.OrderingKey,
		EventType: r.EventType, SchemaVersion: int(r.SchemaVersion), Status: Status(r.Status),
		Attempts: int(r.Attempts), AvailableAt: r.AvailableAt, LeaseExpiresAt: r.LeaseExpiresAt,
		Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, PublishedAt: r.PublishedAt,
	}
	if r.LastError != nil {
		ev.LastError = *r.LastError
	}
	return ev
}

// ListParams filters and pages List. Zero fields do not filter.
type ListParams struct {
	Statuses    []Status // keeps events in any of these statuses
	Destination string   // keeps one destination's events
	OrderingKey string   // keeps one ordering key's events
	// Limit is the page size. Defaults to DefaultListLimit; at most
	// MaxListLimit.
	Limit int
	// After is the cursor: pass the previous page's ListResult.Next.
	After ID
}

// ListResult is one page of List.
type ListResult struct {
	// Events are in ID order, which is creation order (IDs are ULIDs).
	// Payload and Metadata are not loaded.
	Events []EventRow
	// Next is the cursor for the following page; zero on the last page.
	Next ID
}

// Statuses lists every event status.
var Statuses = []Status{StatusPending, StatusPublishing, StatusPublished, StatusDead}

// List returns one page of events matching p, by ID, with keyset paging:
// pages do not shift while events are added.
func (a *Admin) List(ctx context.Context, p ListParams) (*ListResult, error) {
	limit := p.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return nil, &inbox.ValidationError{Field: "limit", Rule: inbox.RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", limit, MaxListLimit)}
	}
	// PostgreSQL cannot compare invalid text: a filter no event can match is
	// the caller's mistake, not a failed database call.
	for _, f := range []struct{ field, value string }{{"destination", p.Destination}, {"ordering_key", p.OrderingKey}} {
		if f.value != "" {
			if err := checkString(f.field, f.value); err != nil {
				return nil, err
			}
		}
	}
	statuses := make([]string, 0, len(p.Statuses))
	for _, s := range p.Statuses {
		if !slices.Contains(Statuses, s) {
			return nil, &inbox.ValidationError{Field: "status", Rule: inbox.RuleOutOfRange, Detail: fmt.Sprintf("%q: must be PENDING, PUBLISHING, PUBLISHED or DEAD", s)}
		}
		statuses = append(statuses, string(s))
	}
	rows, err := db.New(a.pool).OutboxList(ctx, db.OutboxListParams{
		After: p.After, Statuses: statuses, Destination: p.Destination, OrderingKey: p.OrderingKey,
		MaxCount: int32(limit + 1), // one more tells whether a next page exists
	})
	if err != nil {
		return nil, dbError("outbox list", err)
	}
	out := &ListResult{Events: make([]EventRow, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			out.Next = out.Events[limit-1].ID
			break
		}
		out.Events = append(out.Events, eventFromRow(row))
	}
	return out, nil
}
