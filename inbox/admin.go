package inbox

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
)

// Defaults and limits of the admin API.
const (
	DefaultListLimit      = 100
	MaxListLimit          = 1000
	DefaultPurgeBatchSize = 1000
	MaxPurgeBatchSize     = 100_000
	// MaxReasonBytes bounds the reason recorded with a requeue or replay.
	MaxReasonBytes = 1024
)

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Logger receives a record of every requeue, replay and purge, after it
	// commits. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c *AdminConfig) withDefaults() AdminConfig {
	var out AdminConfig
	if c != nil {
		out = *c
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// Admin inspects and repairs receipts. It does nothing by itself: pick a view
// first, which fixes what the caller may see and change:
//
//	admin := inbox.NewAdmin(pool, nil)
//	tenant := admin.ForTenant(tenantID) // one tenant's receipts only
//	global := admin.Global()            // global-scope receipts only
//	ops := admin.Operator()             // every scope, for operators
//
// The scope is part of every query's WHERE clause, so a tenant view cannot read
// or change another tenant's receipt even when it knows the ID: such an ID is
// simply not found.
type Admin struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// NewAdmin returns an Admin on pool. cfg may be nil for the defaults. Like
// NewClient it does not touch the database; the first call reports a missing
// schema.
func NewAdmin(pool *pgxpool.Pool, cfg *AdminConfig) *Admin {
	if pool == nil {
		panic("pginbox: NewAdmin: pool is nil")
	}
	c := cfg.withDefaults()
	return &Admin{pool: pool, log: c.Logger}
}

// ForTenant returns a view of one tenant's receipts. Take the tenant ID from
// authenticated context, never from a request body. An invalid ID makes every
// call of the view fail with a *ValidationError.
func (a *Admin) ForTenant(tenantID string) *AdminView {
	v := &AdminView{admin: a, scope: Tenant(tenantID)}
	if err := validateString("scope.id", tenantID); err != nil {
		v.err = err
	}
	return v
}

// Global returns a view of the global-scope receipts only.
func (a *Admin) Global() *AdminView {
	return &AdminView{admin: a, scope: Global()}
}

// Operator returns a view of every receipt in every scope. Give it to
// operators, not to code acting for a tenant.
func (a *Admin) Operator() *AdminView {
	return &AdminView{admin: a, all: true}
}

// ForScope returns the view of one scope: ForTenant or Global.
func (a *Admin) ForScope(s Scope) *AdminView {
	switch s.Kind {
	case ScopeTenant:
		return a.ForTenant(s.ID)
	case ScopeGlobal:
		v := a.Global()
		if s.ID != "" {
			v.err = &ValidationError{Field: "scope.id", Rule: RuleOutOfRange, Detail: "a global scope has no ID; use inbox.Tenant(id) for a tenant"}
		}
		return v
	default:
		return &AdminView{admin: a, scope: s, err: &ValidationError{Field: "scope", Rule: RuleRequired, Detail: "set Scope to inbox.Tenant(id) or inbox.Global()"}}
	}
}

// AdminView is Admin restricted to a scope (or to none, for Operator). It is
// safe for concurrent use.
type AdminView struct {
	admin *Admin
	all   bool
	scope Scope
	err   error // an invalid view fails every call
}

// String names the view: "tenant(acme)", "global" or "all scopes".
func (v *AdminView) String() string {
	if v.all {
		return "all scopes"
	}
	return v.scope.String()
}

// scopeArgs returns the scope predicate's parameters shared by every admin query.
func (v *AdminView) scopeArgs() (all bool, kind, id string) {
	if v.all {
		return true, "", ""
	}
	return false, string(v.scope.Kind), v.scope.ID
}

// Admin errors. Each concrete error matches one of these with errors.Is.
var (
	// ErrNotFound: no receipt with that ID in the view's scope. A receipt of
	// another tenant is not found either, on purpose.
	ErrNotFound = errors.New("pginbox: receipt not found")
	// ErrVersionConflict matches *VersionConflictError.
	ErrVersionConflict = errors.New("pginbox: version conflict")
	// ErrWrongState matches *WrongStateError.
	ErrWrongState = errors.New("pginbox: wrong state")
	// ErrPayloadPurged matches *PayloadPurgedError.
	ErrPayloadPurged = errors.New("pginbox: payload purged")
)

// VersionConflictError reports a requeue or replay whose expected version is
// not the receipt's current one: it changed since the caller read it. Nothing
// was changed.
type VersionConflictError struct {
	ReceiptID ID
	Action    string // "requeue" or "replay"
	Expected  int64
	Current   int64
}

func (e *VersionConflictError) Error() string {
	return fmt.Sprintf("pginbox: %s %s: version conflict: expected version %d but the receipt is at version %d (it changed since it was read); look at it again and retry with version %d if the %s still applies",
		e.Action, e.ReceiptID, e.Expected, e.Current, e.Current, e.Action)
}

// Is makes errors.Is(err, ErrVersionConflict) true.
func (e *VersionConflictError) Is(target error) bool { return target == ErrVersionConflict }

// WrongStateError reports a requeue or replay of a receipt whose status does
// not allow it. Nothing was changed.
type WrongStateError struct {
	ReceiptID ID
	Action    string
	Found     Status
	Allowed   []Status
}

func (e *WrongStateError) Error() string {
	msg := fmt.Sprintf("pginbox: cannot %s receipt %s: it is %s, %s needs %s",
		e.Action, e.ReceiptID, e.Found, e.Action, joinStatuses(e.Allowed))
	switch {
	case e.Action == "requeue" && e.Found == StatusCompleted:
		msg += "; replay it to run a COMPLETED receipt again"
	case e.Action == "replay" && (e.Found == StatusDead || e.Found == StatusRetryable):
		msg += "; requeue it instead"
	case e.Found == StatusPending || e.Found == StatusProcessing:
		msg += "; it is already queued or running"
	}
	return msg
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *WrongStateError) Is(target error) bool { return target == ErrWrongState }

// PayloadPurgedError reports a replay of a receipt whose payload retention
// purged: there is nothing left to replay. Nothing was changed.
type PayloadPurgedError struct {
	ReceiptID ID
	PurgedAt  time.Time
}

func (e *PayloadPurgedError) Error() string {
	return fmt.Sprintf("pginbox: cannot replay receipt %s: its payload was purged at %s (retention), so there is nothing to replay; have the producer send the event again under a new message ID",
		e.ReceiptID, e.PurgedAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrPayloadPurged) true.
func (e *PayloadPurgedError) Is(target error) bool { return target == ErrPayloadPurged }

func joinStatuses(ss []Status) string {
	switch len(ss) {
	case 0:
		return "nothing"
	case 1:
		return string(ss[0])
	}
	out := ""
	for i, s := range ss {
		switch {
		case i == 0:
		case i == len(ss)-1:
			out += " or "
		default:
			out += ", "
		}
		out += string(s)
	}
	return out
}

func (v *AdminView) notFound(id ID) error {
	return fmt.Errorf("%w: %s (in %s)", ErrNotFound, id, v)
}

// Receipt is a stored receipt as the admin API shows it.
type Receipt struct {
	ID            ID
	Scope         Scope
	Source        string
	Consumer      string
	MessageID     string
	EventType     string
	SchemaVersion int
	// Fingerprint is the SHA-256 content fingerprint (see Fingerprint).
	Fingerprint []byte
	// Payload is the canonical JSON payload. It is nil when purged, and List
	// does not load it (use Get).
	Payload json.RawMessage
	// Metadata is nil in List results.
	Metadata map[string]string

	Status      Status
	Attempts    int
	MaxAttempts int
	// AvailableAt is when the receipt is (or was) due for its next attempt.
	AvailableAt    time.Time
	LeaseExpiresAt *time.Time
	LastError      string

	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt *time.Time
	// Version grows with every change; requeue and replay take it as their
	// expected version.
	Version int64
	// ReplayOf is the receipt this one replays; zero for an original.
	ReplayOf ID
	// PayloadPurgedAt is when retention dropped the payload; nil while kept.
	PayloadPurgedAt *time.Time
}

// Identity returns the receipt's identity (shared by an original and its
// replays).
func (r *Receipt) Identity() Identity {
	return Identity{Scope: r.Scope, Source: r.Source, Consumer: r.Consumer, MessageID: r.MessageID}
}

// Purged reports whether the payload was dropped by Purge.
func (r *Receipt) Purged() bool { return r.PayloadPurgedAt != nil }

// IsReplay reports whether the receipt was created by Replay.
func (r *Receipt) IsReplay() bool { return !r.ReplayOf.IsZero() }

// ReceiptDetails is a receipt with its lineage and audit trail.
type ReceiptDetails struct {
	Receipt
	// Replays are the receipts created by replaying this one, oldest first.
	Replays []ReplaySummary
	// Audit is the trail of admin actions on this receipt, oldest first; for a
	// replay it starts with the replay of its original that created it.
	Audit []AuditEntry
}

// ReplaySummary is one receipt created by a replay.
type ReplaySummary struct {
	ID          ID
	Status      Status
	Version     int64
	CreatedAt   time.Time
	CompletedAt *time.Time
}

// Audit actions.
const (
	AuditRequeue = "requeue"
	AuditReplay  = "replay"
)

// AuditEntry is one audited admin action. From and To describe ReceiptID's
// row: a requeue moves it to PENDING; a replay leaves the original COMPLETED
// (only its version moves) and names the receipt it created in NewReceiptID.
type AuditEntry struct {
	ID           int64
	ReceiptID    ID
	Action       string // AuditRequeue or AuditReplay
	Actor        string
	Reason       string
	FromStatus   Status
	ToStatus     Status
	FromVersion  int64
	ToVersion    int64
	NewReceiptID ID // replays only
	CreatedAt    time.Time
}

// readOnly runs fn in a read-only REPEATABLE READ transaction, so the parts of
// one answer agree with each other.
func (a *Admin) readOnly(ctx context.Context, fn func(q *db.Queries) error) error {
	return pgx.BeginTxFunc(ctx, a.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(db.New(tx)) })
}

// Get returns the receipt with its payload, metadata, replays and audit trail.
// A receipt outside the view's scope is ErrNotFound.
func (v *AdminView) Get(ctx context.Context, id ID) (*ReceiptDetails, error) {
	if v.err != nil {
		return nil, v.err
	}
	all, kind, sid := v.scopeArgs()
	var out *ReceiptDetails
	err := v.admin.readOnly(ctx, func(q *db.Queries) error {
		row, err := q.ReceiptGet(ctx, db.ReceiptGetParams{ID: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if errors.Is(err, pgx.ErrNoRows) {
			return v.notFound(id)
		}
		if err != nil {
			return dbError("get receipt", err)
		}
		r, err := receiptFromRow(row)
		if err != nil {
			return err
		}
		replays, err := q.ReceiptListReplays(ctx, db.ReceiptListReplaysParams{ReplayOf: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if err != nil {
			return dbError("get receipt: replays", err)
		}
		audit, err := q.AuditListByReceipt(ctx, db.AuditListByReceiptParams{
			ReceiptID: id, ReplayOf: row.ReplayOf, AllScopes: all, ScopeKind: kind, ScopeID: sid,
		})
		if err != nil {
			return dbError("get receipt: audit trail", err)
		}
		out = &ReceiptDetails{Receipt: r, Replays: make([]ReplaySummary, 0, len(replays)), Audit: make([]AuditEntry, 0, len(audit))}
		for _, rp := range replays {
			out.Replays = append(out.Replays, ReplaySummary{ID: rp.ID, Status: Status(rp.Status), Version: rp.Version, CreatedAt: rp.CreatedAt, CompletedAt: rp.CompletedAt})
		}
		for _, a := range audit {
			out.Audit = append(out.Audit, auditFromRow(a))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func receiptFromRow(row db.PginboxReceipt) (Receipt, error) {
	r := Receipt{
		ID:              row.ID,
		Scope:           Scope{Kind: ScopeKind(row.ScopeKind), ID: row.ScopeID},
		Source:          row.Source,
		Consumer:        row.Consumer,
		MessageID:       row.MessageID,
		EventType:       row.EventType,
		SchemaVersion:   int(row.SchemaVersion),
		Fingerprint:     row.Fingerprint,
		Status:          Status(row.Status),
		Attempts:        int(row.Attempts),
		MaxAttempts:     int(row.MaxAttempts),
		AvailableAt:     row.AvailableAt,
		LeaseExpiresAt:  row.LeaseExpiresAt,
		CreatedAt:       row.CreatedAt,
		UpdatedAt:       row.UpdatedAt,
		CompletedAt:     row.CompletedAt,
		Version:         row.Version,
		ReplayOf:        row.ReplayOf,
		PayloadPurgedAt: row.PayloadPurgedAt,
	}
	if row.Payload != nil {
		r.Payload = json.RawMessage(*row.Payload)
	}
	if row.LastError != nil {
		r.LastError = *row.LastError
	}
	if row.Metadata != "" {
		if err := json.Unmarshal([]byte(row.Metadata), &r.Metadata); err != nil {
			return Receipt{}, fmt.Errorf("pginbox: receipt %s: decoding metadata: %w", row.ID, err)
		}
	}
	return r, nil
}

func auditFromRow(a db.PginboxAudit) AuditEntry {
	return AuditEntry{
		ID:           a.ID,
		ReceiptID:    a.ReceiptID,
		Action:       a.Action,
		Actor:        a.Actor,
		Reason:       a.Reason,
		FromStatus:   Status(a.FromStatus),
		ToStatus:     Status(a.ToStatus),
		FromVersion:  a.FromVersion,
		ToVersion:    a.ToVersion,
		NewReceiptID: a.NewReceiptID,
		CreatedAt:    a.CreatedAt,
	}
}

// ListParams filters and pages List. Zero fields do not filter.
type ListParams struct {
	// Statuses keeps receipts in any of these statuses.
	Statuses []Status
	Consumer string
	Source   string
	// CreatedAfter keeps receipts created at or after it.
	CreatedAfter time.Time
	// CreatedBefore keeps receipts created before it.
	CreatedBefore time.Time
	// Limit is the page size. Defaults to DefaultListLimit; at most MaxListLimit.
	Limit int
	// After is the cursor: pass the previous page's ListResult.Next.
	After ID
}

// ListResult is one page of List.
type ListResult struct {
	// Receipts are in ID order, which is creation order (IDs are ULIDs).
	// Payload and Metadata are not loaded.
	Receipts []Receipt
	// Next is the cursor for the following page (ListParams.After); zero when
	// this is the last page.
	Next ID
}

var knownStatuses = []Status{StatusPending, StatusProcessing, StatusRetryable, StatusCompleted, StatusDead}

// List returns one page of the view's receipts matching p, in a stable order
// (by ID) with keyset pagination: pages do not shift while receipts are added.
func (v *AdminView) List(ctx context.Context, p ListParams) (*ListResult, error) {
	if v.err != nil {
		return nil, v.err
	}
	limit := p.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return nil, &ValidationError{Field: "limit", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", limit, MaxListLimit)}
	}
	statuses := make([]string, 0, len(p.Statuses))
	for _, s := range p.Statuses {
		if !slices.Contains(knownStatuses, s) {
			return nil, &ValidationError{Field: "status", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%q: must be one of %s", s, joinStatuses(knownStatuses))}
		}
		statuses = append(statuses, string(s))
	}
	all, kind, sid := v.scopeArgs()
	rows, err := db.New(v.admin.pool).ReceiptList(ctx, db.ReceiptListParams{
		AllScopes:     all,
		ScopeKind:     kind,
		ScopeID:       sid,
		After:         p.After,
		Statuses:      statuses,
		Consumer:      p.Consumer,
		Source:        p.Source,
		CreatedAfter:  timePtr(p.CreatedAfter),
		CreatedBefore: timePtr(p.CreatedBefore),
		MaxCount:      int32(limit + 1), // one more tells whether a next page exists
	})
	if err != nil {
		return nil, dbError("list receipts", err)
	}
	out := &ListResult{Receipts: make([]Receipt, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			out.Next = out.Receipts[limit-1].ID
			break
		}
		r := Receipt{
			ID:              row.ID,
			Scope:           Scope{Kind: ScopeKind(row.ScopeKind), ID: row.ScopeID},
			Source:          row.Source,
			Consumer:        row.Consumer,
			MessageID:       row.MessageID,
			EventType:       row.EventType,
			SchemaVersion:   int(row.SchemaVersion),
			Status:          Status(row.Status),
			Attempts:        int(row.Attempts),
			MaxAttempts:     int(row.MaxAttempts),
			AvailableAt:     row.AvailableAt,
			CreatedAt:       row.CreatedAt,
			UpdatedAt:       row.UpdatedAt,
			CompletedAt:     row.CompletedAt,
			Version:         row.Version,
			ReplayOf:        row.ReplayOf,
			PayloadPurgedAt: row.PayloadPurgedAt,
		}
		if row.LastError != nil {
			r.LastError = *row.LastError
		}
		out.Receipts = append(out.Receipts, r)
	}
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// StatsParams configures Stats.
type StatsParams struct {
	// IncludeCompleted also counts COMPLETED receipts. That reads the whole
	// retained history, so its cost grows with retention; the other counts read
	// only the active receipts. Defaults to false.
	IncludeCompleted bool
}

// Stats summarizes the view's receipts.
type Stats struct {
	// Consumers has one entry per consumer with receipts, sorted by name.
	Consumers []ConsumerStats
	// Dead is the number of DEAD receipts over all consumers.
	Dead int64
	// CompletedCounted says whether the Completed counts were filled in
	// (StatsParams.IncludeCompleted).
	CompletedCounted bool
}

// ConsumerStats are one consumer's counts.
type ConsumerStats struct {
	Consumer   string
	Pending    int64
	Processing int64
	Retryable  int64
	Dead       int64
	// Completed is counted only with StatsParams.IncludeCompleted.
	Completed int64
	// Due counts PENDING and RETRYABLE receipts whose time has come.
	Due int64
	// OldestDueAge is the backlog age: how long the longest-waiting due receipt
	// has been due (now - its available_at). Zero when nothing is due.
	OldestDueAge time.Duration
}

// Stats returns counts per consumer and status, the backlog age per consumer
// and the number of DEAD receipts, as one consistent snapshot.
func (v *AdminView) Stats(ctx context.Context, p StatsParams) (*Stats, error) {
	if v.err != nil {
		return nil, v.err
	}
	all, kind, sid := v.scopeArgs()
	out := &Stats{CompletedCounted: p.IncludeCompleted}
	byName := map[string]*ConsumerStats{}
	get := func(name string) *ConsumerStats {
		cs, ok := byName[name]
		if !ok {
			cs = &ConsumerStats{Consumer: name}
			byName[name] = cs
		}
		return cs
	}
	err := v.admin.readOnly(ctx, func(q *db.Queries) error {
		rows, err := q.ReceiptStats(ctx, db.ReceiptStatsParams{AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if err != nil {
			return dbError("stats", err)
		}
		for _, r := range rows {
			cs := get(r.Consumer)
			switch Status(r.Status) {
			case StatusPending:
				cs.Pending = r.Total
			case StatusProcessing:
				cs.Processing = r.Total
			case StatusRetryable:
				cs.Retryable = r.Total
			case StatusDead:
				cs.Dead = r.Total
				out.Dead += r.Total
			}
			cs.Due += r.Due
			cs.OldestDueAge = max(cs.OldestDueAge, time.Duration(r.OldestDueMs)*time.Millisecond)
		}
		if !p.IncludeCompleted {
			return nil
		}
		done, err := q.ReceiptStatsCompleted(ctx, db.ReceiptStatsCompletedParams{AllScopes: all, ScopeKind: kind, ScopeID: sid})
		if err != nil {
			return dbError("stats: completed", err)
		}
		for _, r := range done {
			get(r.Consumer).Completed = r.Total
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Consumers = make([]ConsumerStats, 0, len(byName))
	for _, cs := range byName {
		out.Consumers = append(out.Consumers, *cs)
	}
	slices.SortFunc(out.Consumers, func(a, b ConsumerStats) int {
		switch {
		case a.Consumer < b.Consumer:
			return -1
		case a.Consumer > b.Consumer:
			return 1
		}
		return 0
	})
	return out, nil
}
