package inbox

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
)

// Outcomes that only batch items have: Accept and AcceptTx report these as
// errors (*ConflictError, *ValidationError) instead.
const (
	Conflict Outcome = "conflict"
	Invalid  Outcome = "invalid"
)

// BatchItem is the result of one message of a batch accept.
type BatchItem struct {
	// Outcome is Accepted, Duplicate, Conflict or Invalid.
	Outcome Outcome
	// ID is the receipt that holds the identity: the new one (Accepted), the
	// existing one (Duplicate, Conflict), or zero (Invalid).
	ID ID
	// Status is the receipt's current status; zero for Invalid.
	Status Status
	// Err is the *ConflictError or *ValidationError of a Conflict or Invalid
	// item, nil otherwise, so ActionFor(item.Err) tells the transport what to do.
	Err error
}

// Action is ActionFor(item.Err): ack accepted and duplicate items, reject the
// others.
func (it BatchItem) Action() Action { return ActionFor(it.Err) }

// acceptBatch1 is AcceptBatch without middleware.
func (c *Client) acceptBatch1(ctx context.Context, msgs []Message) ([]BatchItem, error) {
	items, valid := c.prepareBatch(msgs)
	if len(valid) == 0 {
		return items, nil
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pginbox: accept batch: acquiring a connection: %w", err)
	}
	defer conn.Release()
	if err := c.acceptBatchOwn(ctx, conn, valid, func(i int, it BatchItem) { items[i] = it }); err != nil {
		return nil, err
	}
	return items, nil
}

// acceptBatchTx is AcceptBatchTx without middleware.
func (c *Client) acceptBatchTx(ctx context.Context, tx pgx.Tx, msgs []Message) ([]BatchItem, error) {
	items, valid := c.prepareBatch(msgs)
	if len(valid) == 0 {
		return items, nil
	}
	if err := c.acceptBatchCaller(ctx, tx, valid, func(i int, it BatchItem) { items[i] = it }); err != nil {
		return nil, err
	}
	return items, nil
}

// batchEntry is a validated message and its position in the caller's batch.
type batchEntry struct {
	pos int
	d   *draft
}

// prepareBatch validates every message: invalid ones get their item now, the
// rest are returned for the database.
func (c *Client) prepareBatch(msgs []Message) ([]BatchItem, []batchEntry) {
	items := make([]BatchItem, len(msgs))
	valid := make([]batchEntry, 0, len(msgs))
	for i, m := range msgs {
		d, err := c.prepare(m)
		if err != nil {
			items[i] = BatchItem{Outcome: Invalid, Err: err}
			continue
		}
		valid = append(valid, batchEntry{pos: i, d: d})
	}
	return items, valid
}

func compareIdentities(a, b Identity) int {
	return cmp.Or(
		cmp.Compare(a.Scope.Kind, b.Scope.Kind),
		cmp.Compare(a.Scope.ID, b.Scope.ID),
		cmp.Compare(a.Source, b.Source),
		cmp.Compare(a.Consumer, b.Consumer),
		cmp.Compare(a.MessageID, b.MessageID),
	)
}

// batchScopes lists the scopes of entries[distinct], each once; distinct is in
// identity order, so one scope's entries are together.
func batchScopes(entries []batchEntry, distinct []int) []Scope {
	var scopes []Scope
	for _, i := range distinct {
		if s := entries[i].d.identity.Scope; len(scopes) == 0 || scopes[len(scopes)-1] != s {
			scopes = append(scopes, s)
		}
	}
	return scopes
}

// holder is the receipt that owns an identity after the insert.
type holder struct {
	id          ID
	status      Status
	fingerprint []byte
	insertedPos int // pos of the entry whose insert created it; -1 if it existed
}

// acceptBatch inserts the distinct identities of entries in one statement, reads
// the receipts of those that already existed in a second one, and reports every
// entry through set. autocommit means q runs outside a transaction, so the insert
// statement is also the commit. With routed (Citus; the entries are then of one
// scope) the insert is acceptBatchRouted's pipeline on routed instead.
func (c *Client) acceptBatch(ctx context.Context, q *db.Queries, routed batcher, entries []batchEntry, autocommit bool, set func(pos int, it BatchItem)) error {
	// First occurrence of each identity wins; later ones resolve against it.
	first := make(map[Identity]int, len(entries))
	distinct := make([]int, 0, len(entries))
	for i := range entries {
		k := entries[i].d.identity
		if _, seen := first[k]; !seen {
			first[k] = i
			distinct = append(distinct, i)
		}
	}
	// One global insert order: two batches inserting overlapping identities wait
	// on each other's uncommitted rows in the same order, so they cannot deadlock.
	slices.SortFunc(distinct, func(a, b int) int {
		return compareIdentities(entries[a].d.identity, entries[b].d.identity)
	})

	n := len(distinct)
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
		MaxAttempts:    int32(c.cfg.MaxAttempts),
	}
	for j, i := range distinct {
		d := entries[i].d
		arg.Ids[j] = d.id.UUIDString()
		arg.ScopeKinds[j] = string(d.identity.Scope.Kind)
		arg.ScopeIds[j] = d.identity.Scope.ID
		arg.Sources[j] = d.identity.Source
		arg.Consumers[j] = d.identity.Consumer
		arg.MessageIds[j] = d.identity.MessageID
		arg.EventTypes[j] = d.eventType
		arg.SchemaVersions[j] = d.schemaVersion
		arg.Fingerprints[j] = d.fingerprint[:]
		arg.Payloads[j] = d.payload
		arg.Metadatas[j] = d.metadata
	}
	// Inside a caller's transaction the wake-up must roll back with it; on its
	// own, the batch's wake-up may be coalesced with other accepts'.
	var scopes []Scope
	if autocommit {
		scopes = batchScopes(entries, distinct)
	}
	arg.Notify = !autocommit || c.wakeups.inline(scopes...)
	var inserted []ID
	var err error
	if routed != nil {
		inserted, err = acceptBatchRouted(ctx, routed, entries, distinct, arg, autocommit)
	} else {
		inserted, err = q.ReceiptAcceptBatch(ctx, arg)
	}
	if err != nil {
		if autocommit && !certainlyNotCommitted(ctx, err) {
			return fmt.Errorf("%w: %w", ErrCommitUncertain, err)
		}
		return dbError("accept batch", err)
	}
	if !arg.Notify && len(inserted) > 0 {
		var consumers []string
		for _, i := range distinct {
			if name := entries[i].d.identity.Consumer; !slices.Contains(consumers, name) {
				consumers = append(consumers, name)
			}
		}
		c.wakeups.later(consumers, scopes)
	}

	holders := make(map[Identity]holder, n)
	if len(inserted) > 0 {
		byID := make(map[ID]int, n)
		for _, i := range distinct {
			byID[entries[i].d.id] = i
		}
		for _, id := range inserted {
			i := byID[id]
			holders[entries[i].d.identity] = holder{id: id, status: StatusPending, fingerprint: entries[i].d.fingerprint[:], insertedPos: i}
		}
	}
	if len(inserted) < n {
		// The rest existed. ON CONFLICT waited for any concurrent inserter to
		// finish, so this new statement sees their committed rows.
		var ex db.ReceiptsByIdentitiesParams
		for _, i := range distinct {
			id := entries[i].d.identity
			if _, ok := holders[id]; ok {
				continue
			}
			ex.ScopeKinds = append(ex.ScopeKinds, string(id.Scope.Kind))
			ex.ScopeIds = append(ex.ScopeIds, id.Scope.ID)
			ex.Sources = append(ex.Sources, id.Source)
			ex.Consumers = append(ex.Consumers, id.Consumer)
			ex.MessageIds = append(ex.MessageIds, id.MessageID)
		}
		var rows []db.ReceiptsByIdentitiesRow
		var err error
		if routed != nil {
			s := entries[0].d.identity.Scope
			var rr []db.ReceiptsByIdentitiesRoutedRow
			rr, err = q.ReceiptsByIdentitiesRouted(ctx, db.ReceiptsByIdentitiesRoutedParams{
				ScopeKind: string(s.Kind), ScopeID: s.ID,
				Sources: ex.Sources, Consumers: ex.Consumers, MessageIds: ex.MessageIds,
			})
			for _, r := range rr {
				rows = append(rows, db.ReceiptsByIdentitiesRow(r))
			}
		} else {
			rows, err = q.ReceiptsByIdentities(ctx, ex)
		}
		if err != nil {
			return dbError("accept batch: reading the existing receipts", err)
		}
		for _, r := range rows {
			k := identityOf(r.ScopeKind, r.ScopeID, r.Source, r.Consumer, r.MessageID)
			holders[k] = holder{id: r.ID, status: liveStatus(r.Status), fingerprint: r.Fingerprint, insertedPos: -1}
		}
	}

	for i := range entries {
		d := entries[i].d
		h, ok := holders[d.identity]
		if !ok {
			// Only a receipt deleted between the two statements gets here.
			return fmt.Errorf("pginbox: accept batch: the receipt of %s vanished while accepting: retry the batch", d.identity)
		}
		set(entries[i].pos, resolve(d, h, h.insertedPos == i))
	}
	return nil
}

// resolve turns the receipt holding an entry's identity into the entry's item.
func resolve(d *draft, h holder, inserted bool) BatchItem {
	switch {
	case inserted:
		return BatchItem{Outcome: Accepted, ID: h.id, Status: StatusPending}
	case bytes.Equal(h.fingerprint, d.fingerprint[:]):
		return BatchItem{Outcome: Duplicate, ID: h.id, Status: h.status}
	default:
		return BatchItem{Outcome: Conflict, ID: h.id, Status: h.status,
			Err: &ConflictError{Identity: d.identity, ReceiptID: h.id}}
	}
}
