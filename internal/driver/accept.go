package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// Draft is a validated message with everything its receipt stores.
type Draft struct {
	ID            inboxtype.ID       // the new receipt's ID
	Identity      inboxtype.Identity // what makes two deliveries the same message
	EventType     string             // the payload's type
	SchemaVersion int32              // the payload's schema version
	Fingerprint   [32]byte           // of the event type, version and canonical payload
	Payload       string             // canonical JSON
	Metadata      string             // a JSON object of strings
	MaxAttempts   int32              // the retry budget
	OrderingKey   string             // "" for an unordered message
}

// AcceptPlan is what one Accept* call writes: every Accept, AcceptTx,
// AcceptBatch, AcceptBatchTx and group commit runs one plan.
type AcceptPlan struct {
	// Conn runs the plan outside any caller's transaction: in a statement
	// that is its own commit, or in a transaction of its own. Nil with Tx.
	Conn *pgxpool.Conn
	// Tx is the caller's transaction. It has the first group's scope
	// (EnsureScope); the later groups get theirs in turn, and it has none
	// at the end.
	Tx pgx.Tx
	// Groups are the drafts per scope, in scope order.
	Groups []AcceptGroup
	// Scoped applies each group's scope (row-level security) when the plan
	// runs on Conn in statements of their own; a transaction always does.
	Scoped bool
	// Wake is asked once, when the plan commits in one statement of its
	// own, whether that statement wakes the workers. In a transaction the
	// wake-up always rides in it (a rollback must wake nobody).
	Wake func() bool
	// OnNode says Conn runs on a Citus worker node (Nodes), where the
	// workers listen too: a wake-up may then be sent from the node that
	// runs the accept.
	OnNode bool
}

// AcceptGroup is the drafts of one scope, each identity once. Plain drafts
// are in identity order: two batches with overlapping identities then wait
// on each other's rows in the same order and cannot deadlock. Keyed drafts
// (an ordering key) are in accept order, which is their keys' order.
type AcceptGroup struct {
	Scope inboxtype.Scope // the group's scope
	Plain []*Draft        // without an ordering key, in identity order
	Keyed []*Draft        // with one, in accept order
}

// Accepted is what a plan did.
type Accepted struct {
	// Inserted are the drafts whose receipt the plan inserted.
	Inserted []inboxtype.ID
	// Existing are the receipts of the identities that existed.
	Existing []Holder
	// Woken reports that the workers were woken with the plan; otherwise
	// the caller wakes them for what it inserted.
	Woken bool
}

// Holder is a receipt that held an identity before the plan.
type Holder struct {
	ID          inboxtype.ID       // the receipt's ID
	Identity    inboxtype.Identity // the identity it holds
	Status      string             // its live status (the work row's while it has one)
	Fingerprint []byte             // its content's fingerprint
}

// CommitError is a failed commit of a plan (a statement that was its own
// commit, or COMMIT): unless the server answered with an error, the plan
// may have committed.
type CommitError struct {
	Err error // what the commit returned
}

func (e *CommitError) Error() string { return e.Err.Error() }
func (e *CommitError) Unwrap() error { return e.Err }

func commitError(err error) error {
	if err == nil {
		return nil
	}
	return &CommitError{err}
}

// one returns the plan's draft when it is one plain draft.
func (p *AcceptPlan) one() *Draft {
	if len(p.Groups) == 1 && len(p.Groups[0].Plain) == 1 && len(p.Groups[0].Keyed) == 0 {
		return p.Groups[0].Plain[0]
	}
	return nil
}

// keyed reports whether any group has keyed drafts.
func (p *AcceptPlan) keyed() bool {
	for _, g := range p.Groups {
		if len(g.Keyed) > 0 {
			return true
		}
	}
	return false
}

// acceptParams are ReceiptAccept's arguments for d.
func (d *Draft) acceptParams(notify bool) db.ReceiptAcceptParams {
	return db.ReceiptAcceptParams{
		ID:            d.ID,
		ScopeKind:     string(d.Identity.Scope.Kind),
		ScopeID:       d.Identity.Scope.ID,
		Source:        d.Identity.Source,
		Consumer:      d.Identity.Consumer,
		MessageID:     d.Identity.MessageID,
		EventType:     d.EventType,
		SchemaVersion: d.SchemaVersion,
		Fingerprint:   d.Fingerprint[:],
		Payload:       &d.Payload,
		Metadata:      d.Metadata,
		MaxAttempts:   d.MaxAttempts,
		Notify:        notify,
	}
}

// batchParams are ReceiptAcceptBatch's arguments for drafts.
func batchParams(drafts []*Draft, notify bool) db.ReceiptAcceptBatchParams {
	n := len(drafts)
	arg := db.ReceiptAcceptBatchParams{
		Ids:            make([]string, n),
		ScopeKinds:     make([]string, n),
		ScopeIds:       make([]string, n),
		Sources:        make([]string, n),
		Consumers:      make([]string, n),
		MessageIds:     make([]string, n),
		EventTypes:     make([]string, n),
		SchemaVersions: make([]int32, n),
		Fingerprints:   make([][]byte, n),
		Payloads:       make([]string, n),
		Metadatas:      make([]string, n),
		Notify:         notify,
	}
	for j, d := range drafts {
		arg.Ids[j] = d.ID.UUIDString()
		arg.ScopeKinds[j] = string(d.Identity.Scope.Kind)
		arg.ScopeIds[j] = d.Identity.Scope.ID
		arg.Sources[j] = d.Identity.Source
		arg.Consumers[j] = d.Identity.Consumer
		arg.MessageIds[j] = d.Identity.MessageID
		arg.EventTypes[j] = d.EventType
		arg.SchemaVersions[j] = d.SchemaVersion
		arg.Fingerprints[j] = d.Fingerprint[:]
		arg.Payloads[j] = d.Payload
		arg.Metadatas[j] = d.Metadata
		arg.MaxAttempts = d.MaxAttempts // one Client's drafts share it
	}
	return arg
}

// plainDrafts returns every group's plain drafts, in the groups' order.
func (p *AcceptPlan) plainDrafts() []*Draft {
	var all []*Draft
	for _, g := range p.Groups {
		all = append(all, g.Plain...)
	}
	return all
}

// holderByIdentity reads the receipt holding d's identity (ReceiptAccept
// inserted nothing). ON CONFLICT waited for any concurrent inserter to
// finish, so the row is committed and this new statement sees it.
func holderByIdentity(ctx context.Context, q *db.Queries, d *Draft) (Holder, error) {
	id := d.Identity
	r, err := q.ReceiptByIdentity(ctx, db.ReceiptByIdentityParams{
		ScopeKind: string(id.Scope.Kind), ScopeID: id.Scope.ID, Source: id.Source,
		Consumer: id.Consumer, MessageID: id.MessageID,
	})
	if err != nil {
		return Holder{}, fmt.Errorf("reading the existing receipt: %w", err)
	}
	return Holder{ID: r.ID, Identity: id, Status: r.Status, Fingerprint: r.Fingerprint}, nil
}

// missing returns the drafts not inserted.
func missing(drafts []*Draft, inserted []inboxtype.ID) []*Draft {
	if len(inserted) == len(drafts) {
		return nil
	}
	in := make(map[inboxtype.ID]bool, len(inserted))
	for _, id := range inserted {
		in[id] = true
	}
	var out []*Draft
	for _, d := range drafts {
		if !in[d.ID] {
			out = append(out, d)
		}
	}
	return out
}

// holdersOfScope reads the receipts holding the identities of drafts, all
// of scope s (ReceiptsByIdentitiesRouted: routed to the scope's node on
// Citus).
func holdersOfScope(ctx context.Context, q *db.Queries, s inboxtype.Scope, drafts []*Draft) ([]Holder, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	ex := db.ReceiptsByIdentitiesRoutedParams{ScopeKind: string(s.Kind), ScopeID: s.ID}
	for _, d := range drafts {
		ex.Sources = append(ex.Sources, d.Identity.Source)
		ex.Consumers = append(ex.Consumers, d.Identity.Consumer)
		ex.MessageIds = append(ex.MessageIds, d.Identity.MessageID)
	}
	rows, err := q.ReceiptsByIdentitiesRouted(ctx, ex)
	if err != nil {
		return nil, fmt.Errorf("reading the existing receipts: %w", err)
	}
	out := make([]Holder, len(rows))
	for i, r := range rows {
		out[i] = Holder{ID: r.ID, Status: r.Status, Fingerprint: r.Fingerprint,
			Identity: inboxtype.IdentityOf(r.ScopeKind, r.ScopeID, r.Source, r.Consumer, r.MessageID)}
	}
	return out, nil
}

// consumersOf lists the consumers of drafts, each once.
func consumersOf(drafts []*Draft) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range drafts {
		if !seen[d.Identity.Consumer] {
			seen[d.Identity.Consumer] = true
			out = append(out, d.Identity.Consumer)
		}
	}
	return out
}

// acceptKeyed inserts the keyed drafts of scope s in tx (which has the
// scope, or q applies it with the locks): it locks their keys
// (ReceiptKeyLock), then in one round trip inserts each receipt with the
// next number of its key and queues it BLOCKED behind an earlier receipt of
// the key, or PENDING (ReceiptQueueKeyed), and wakes the workers at commit.
// insert queues the layout's insert of one draft and returns how many
// statements it queued. The lock serializes these with the promotion of the
// key's next receipt when its head completes, so a receipt is never queued
// PENDING behind a head that is still there, nor BLOCKED behind one whose
// removal committed without promoting it.
func acceptKeyed(ctx context.Context, tx pgx.Tx, q *db.Queries, s inboxtype.Scope, drafts []*Draft,
	insert func(bq *db.Queries, p db.ReceiptInsertKeyedParams) int, out *Accepted) error {
	locks := make([]string, len(drafts))
	for i, d := range drafts {
		locks[i] = KeyLockName(d.Identity.Consumer, s, d.OrderingKey)
	}
	if err := q.ReceiptKeyLock(ctx, db.ReceiptKeyLockParams{Keys: locks, ScopeID: s.ID}); err != nil {
		return fmt.Errorf("locking the ordering keys: %w", err)
	}
	// Then one round trip: each message's statements, run with snapshots
	// taken after the locks were granted.
	b := &pgx.Batch{}
	bq := Queue(b)
	steps := 0
	for _, d := range drafts {
		steps = insert(bq, db.ReceiptInsertKeyedParams{
			ID: d.ID, ScopeKind: string(s.Kind), ScopeID: s.ID,
			Source: d.Identity.Source, Consumer: d.Identity.Consumer, MessageID: d.Identity.MessageID,
			EventType: d.EventType, SchemaVersion: d.SchemaVersion, Fingerprint: d.Fingerprint[:],
			Payload: d.Payload, Metadata: d.Metadata, MaxAttempts: d.MaxAttempts, OrderingKey: d.OrderingKey,
		})
		_, _ = bq.ReceiptQueueKeyed(ctx, db.ReceiptQueueKeyedParams{ScopeID: s.ID, ID: d.ID})
	}
	// Wakes the workers at commit; for a duplicate too (the pipeline cannot
	// know before it runs), which wakes a worker that then finds nothing.
	_ = bq.ReceiptNotify(ctx, consumersOf(drafts))
	br := tx.SendBatch(ctx, b)
	var dups []*Draft
	for _, d := range drafts {
		if err := readExecs(br, steps); err != nil {
			br.Close()
			return err
		}
		// A queue row is inserted exactly when the receipt was.
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if tag.RowsAffected() == 1 {
			out.Inserted = append(out.Inserted, d.ID)
		} else {
			dups = append(dups, d)
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fmt.Errorf("waking the workers: %w", err)
	}
	if err := br.Close(); err != nil {
		return err
	}
	holders, err := holdersOfScope(ctx, db.New(tx), s, dups)
	out.Existing = append(out.Existing, holders...)
	return err
}

// KeyLockName names the advisory lock of one consumer's key in scope s. The
// unit separator cannot occur in an identity string, so two different
// triples never share a name (their hashes may collide: they then share the
// lock, which only serializes more).
func KeyLockName(consumer string, s inboxtype.Scope, key string) string {
	return consumer + "\x1f" + string(s.Kind) + "\x1f" + s.ID + "\x1f" + key
}

// ownTxPlan runs p on p.Conn in a transaction of its own, each group after
// its scope, with group, the layout's accept of one group in a
// transaction; its commit failing is a CommitError.
func ownTxPlan(ctx context.Context, d Driver, p *AcceptPlan, group func(ctx context.Context, tx pgx.Tx, q *db.Queries, g AcceptGroup, out *Accepted) error) (*Accepted, error) {
	tx, err := p.Conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	out := &Accepted{Woken: true}
	for _, g := range p.Groups {
		if err := group(ctx, tx, db.New(d.Scoped(tx, g.Scope)), g, out); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, commitError(fmt.Errorf("commit: %w", err))
	}
	return out, nil
}

// callerTxPlan runs p in the caller's transaction: the first group in the
// scope it has, each later one after its own, and no scope at the end.
func callerTxPlan(ctx context.Context, d Driver, p *AcceptPlan, group func(ctx context.Context, tx pgx.Tx, q *db.Queries, g AcceptGroup, out *Accepted) error) (*Accepted, error) {
	out := &Accepted{Woken: true}
	for i, g := range p.Groups {
		q := db.New(p.Tx)
		if i > 0 {
			q = db.New(d.Scoped(p.Tx, g.Scope))
		}
		if err := group(ctx, p.Tx, q, g, out); err != nil {
			return nil, err
		}
	}
	if len(p.Groups) > 1 {
		if err := d.SetScope(ctx, p.Tx, NoScope); err != nil {
			return nil, fmt.Errorf("clearing the scope: %w", err)
		}
	}
	return out, nil
}

// errNoPlan guards against an empty plan.
var errNoPlan = errors.New("pginbox: internal: an accept plan needs Conn or Tx and a group")

func (p *AcceptPlan) check() error {
	if (p.Conn == nil) == (p.Tx == nil) || len(p.Groups) == 0 {
		return errNoPlan
	}
	return nil
}
