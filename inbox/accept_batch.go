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

// AcceptBatch accepts many messages with one multi-row insert and one commit, for
// transports that acknowledge per batch (Kafka offsets, NATS ack-all). It returns
// one item per message, in order. An invalid or conflicting message does not stop
// the others; repeats of one identity inside the batch resolve to one receipt
// (the first wins; a repeat is a Duplicate of it, or a Conflict when its content
// differs).
//
// The error is for the whole batch, and then no item is reliable: a storage
// failure, or ErrCommitUncertain when the connection failed after the insert was
// sent. Do not acknowledge any message then; redeliveries reconcile.
//
// The batch travels in one statement, so bound its size (hundreds, not millions).
func (c *Client) AcceptBatch(ctx context.Context, msgs []Message) ([]BatchItem, error) {
	items, valid := c.prepareBatch(msgs)
	if len(valid) == 0 {
		return items, nil
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pginbox: accept batch: acquiring a connection: %w", err)
	}
	defer conn.Release()
	if err := c.acceptBatch(ctx, db.New(conn), valid, true, func(i int, it BatchItem) { items[i] = it }); err != nil {
		return nil, err
	}
	return items, nil
}

// AcceptBatchTx is AcceptBatch inside the caller's transaction: the receipts
// commit or roll back with it, and the caller owns the commit. Whatever items
// say, nothing is stored unless tx commits.
func (c *Client) AcceptBatchTx(ctx context.Context, tx pgx.Tx, msgs []Message) ([]BatchItem, error) {
	items, valid := c.prepareBatch(msgs)
	if len(valid) == 0 {
		return items, nil
	}
	if err := c.acceptBatch(ctx, db.New(tx), valid, false, func(i int, it BatchItem) { items[i] = it }); err != nil {
		return nil, err
	}
	return items, nil
}

// batchEntry is a validated message and its position in the caller's batch.
type batchEntry struct {
	pos int
	p   db.ReceiptAcceptParams
}

// prepareBatch validates every message: invalid ones get their item now, the
// rest are returned for the database.
func (c *Client) prepareBatch(msgs []Message) ([]BatchItem, []batchEntry) {
	items := make([]BatchItem, len(msgs))
	valid := make([]batchEntry, 0, len(msgs))
	for i, m := range msgs {
		p, err := c.prepare(m)
		if err != nil {
			items[i] = BatchItem{Outcome: Invalid, Err: err}
			continue
		}
		valid = append(valid, batchEntry{pos: i, p: p})
	}
	return items, valid
}

// identityKey is a receipt identity as a map key.
type identityKey struct {
	scopeKind, scopeID, source, consumer, messageID string
}

func keyOf(p *db.ReceiptAcceptParams) identityKey {
	return identityKey{p.ScopeKind, p.ScopeID, p.Source, p.Consumer, p.MessageID}
}

func compareKeys(a, b identityKey) int {
	return cmp.Or(
		cmp.Compare(a.scopeKind, b.scopeKind),
		cmp.Compare(a.scopeID, b.scopeID),
		cmp.Compare(a.source, b.source),
		cmp.Compare(a.consumer, b.consumer),
		cmp.Compare(a.messageID, b.messageID),
	)
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
// statement is also the commit.
func (c *Client) acceptBatch(ctx context.Context, q *db.Queries, entries []batchEntry, autocommit bool, set func(pos int, it BatchItem)) error {
	// First occurrence of each identity wins; later ones resolve against it.
	first := make(map[identityKey]int, len(entries))
	distinct := make([]int, 0, len(entries))
	for i := range entries {
		k := keyOf(&entries[i].p)
		if _, seen := first[k]; !seen {
			first[k] = i
			distinct = append(distinct, i)
		}
	}
	// One global insert order: two batches inserting overlapping identities wait
	// on each other's uncommitted rows in the same order, so they cannot deadlock.
	slices.SortFunc(distinct, func(a, b int) int {
		return compareKeys(keyOf(&entries[a].p), keyOf(&entries[b].p))
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
		p := &entries[i].p
		arg.Ids[j] = p.ID.UUIDString()
		arg.ScopeKinds[j] = p.ScopeKind
		arg.ScopeIds[j] = p.ScopeID
		arg.Sources[j] = p.Source
		arg.Consumers[j] = p.Consumer
		arg.MessageIds[j] = p.MessageID
		arg.EventTypes[j] = p.EventType
		arg.SchemaVersions[j] = p.SchemaVersion
		arg.Fingerprints[j] = p.Fingerprint
		arg.Payloads[j] = *p.Payload
		arg.Metadatas[j] = p.Metadata
	}
	// Inside a caller's transaction the wake-up must roll back with it; on its
	// own, the batch's wake-up may be coalesced with other accepts'.
	arg.Notify = !autocommit || c.wakeups.inline()
	inserted, err := q.ReceiptAcceptBatch(ctx, arg)
	if err != nil {
		if autocommit {
			return commitError(ctx, err)
		}
		return dbError("accept batch", err)
	}
	if !arg.Notify && len(inserted) > 0 {
		for _, i := range distinct {
			c.wakeups.later(entries[i].p.Consumer)
		}
	}

	holders := make(map[identityKey]holder, n)
	if len(inserted) > 0 {
		byID := make(map[ID]int, n)
		for _, i := range distinct {
			byID[entries[i].p.ID] = i
		}
		for _, id := range inserted {
			i := byID[id]
			holders[keyOf(&entries[i].p)] = holder{id: id, status: StatusPending, fingerprint: entries[i].p.Fingerprint, insertedPos: i}
		}
	}
	if len(inserted) < n {
		// The rest existed. ON CONFLICT waited for any concurrent inserter to
		// finish, so this new statement sees their committed rows.
		var ex db.ReceiptsByIdentitiesParams
		for _, i := range distinct {
			p := &entries[i].p
			if _, ok := holders[keyOf(p)]; ok {
				continue
			}
			ex.ScopeKinds = append(ex.ScopeKinds, p.ScopeKind)
			ex.ScopeIds = append(ex.ScopeIds, p.ScopeID)
			ex.Sources = append(ex.Sources, p.Source)
			ex.Consumers = append(ex.Consumers, p.Consumer)
			ex.MessageIds = append(ex.MessageIds, p.MessageID)
		}
		rows, err := q.ReceiptsByIdentities(ctx, ex)
		if err != nil {
			return dbError("accept batch: reading the existing receipts", err)
		}
		for _, r := range rows {
			k := identityKey{r.ScopeKind, r.ScopeID, r.Source, r.Consumer, r.MessageID}
			holders[k] = holder{id: r.ID, status: Status(r.Status), fingerprint: r.Fingerprint, insertedPos: -1}
		}
	}

	for i := range entries {
		p := &entries[i].p
		h, ok := holders[keyOf(p)]
		if !ok {
			// Only a receipt deleted between the two statements gets here.
			id := Identity{Scope: Scope{Kind: ScopeKind(p.ScopeKind), ID: p.ScopeID}, Source: p.Source, Consumer: p.Consumer, MessageID: p.MessageID}
			return fmt.Errorf("pginbox: accept batch: the receipt of %s vanished while accepting: retry the batch", id)
		}
		set(entries[i].pos, resolve(p, h, h.insertedPos == i))
	}
	return nil
}

// resolve turns the receipt holding an entry's identity into the entry's item.
func resolve(p *db.ReceiptAcceptParams, h holder, inserted bool) BatchItem {
	switch {
	case inserted:
		return BatchItem{Outcome: Accepted, ID: h.id, Status: StatusPending}
	case bytes.Equal(h.fingerprint, p.Fingerprint):
		return BatchItem{Outcome: Duplicate, ID: h.id, Status: h.status}
	default:
		return BatchItem{Outcome: Conflict, ID: h.id, Status: h.status, Err: &ConflictError{
			Identity: Identity{
				Scope:  Scope{Kind: ScopeKind(p.ScopeKind), ID: p.ScopeID},
				Source: p.Source, Consumer: p.Consumer, MessageID: p.MessageID,
			},
			ReceiptID: h.id,
		}}
	}
}
