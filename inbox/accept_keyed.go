package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
)

// Messages with an ordering key are accepted in a transaction that first
// locks their keys (ReceiptKeyLock), then inserts each receipt with the next
// sequence number of its key (ReceiptInsertKeyed) and queues it BLOCKED
// behind an earlier receipt of the key, or PENDING (ReceiptQueueKeyed). The
// lock serializes these with the promotion of the key's next receipt when
// its head completes, so a receipt is never queued PENDING behind a head
// that is still there, nor BLOCKED behind one whose removal committed
// without promoting it. Unkeyed messages keep their single statement.

// keyLockName names the advisory lock of one consumer's key in scope s. The
// unit separator cannot occur in an identity string, so two different
// triples never share a name (their hashes may collide: they then share the
// lock, which only serializes more).
func keyLockName(consumer string, s Scope, key string) string {
	return consumer + "\x1f" + string(s.Kind) + "\x1f" + s.ID + "\x1f" + key
}

// hasKeyed reports whether any entry carries an ordering key.
func hasKeyed(entries []batchEntry) bool {
	for _, e := range entries {
		if e.d.orderingKey != "" {
			return true
		}
	}
	return false
}

// acceptGroup accepts entries of one scope inside a transaction that has
// that scope (q applies it, or tx has it): the keyed ones first, under their
// keys' locks, then the rest with acceptBatch.
func (c *Client) acceptGroup(ctx context.Context, tx pgx.Tx, q *db.Queries, routed batcher, s Scope, entries []batchEntry, set func(int, BatchItem)) error {
	distributed := routed != nil
	var keyed, plain []batchEntry
	for _, e := range entries {
		if e.d.orderingKey != "" {
			keyed = append(keyed, e)
		} else {
			plain = append(plain, e)
		}
	}
	if len(keyed) > 0 {
		if err := c.acceptKeyed(ctx, tx, q, s, keyed, distributed, set); err != nil {
			return err
		}
	}
	if len(plain) > 0 {
		return c.acceptBatch(ctx, q, routed, plain, false, set)
	}
	return nil
}

// acceptKeyed inserts entries (of scope s, each with an ordering key) in
// their order, which is their keys' order: the first of a key in the batch
// gets the next number, and the later ones wait behind it. Every statement
// carries the scope; on Citus (distributed) the insert is two routed ones,
// so they all run on the scope's node.
func (c *Client) acceptKeyed(ctx context.Context, tx pgx.Tx, q *db.Queries, s Scope, entries []batchEntry, distributed bool, set func(int, BatchItem)) error {
	// First occurrence of each identity wins; later ones resolve against it.
	first := make(map[Identity]int, len(entries))
	var distinct []int
	locks := make([]string, 0, len(entries))
	for i, e := range entries {
		if _, seen := first[e.d.identity]; seen {
			continue
		}
		first[e.d.identity] = i
		distinct = append(distinct, i)
		locks = append(locks, keyLockName(e.d.identity.Consumer, s, e.d.orderingKey))
	}
	// q applies the scope with the locks (on Citus too, where it takes
	// statements of its own); the rest of the transaction keeps it.
	if err := q.ReceiptKeyLock(ctx, db.ReceiptKeyLockParams{Keys: locks, ScopeID: s.ID}); err != nil {
		return dbError("accept: locking the ordering keys", err)
	}
	// Then one round trip: each message's statements, run with snapshots
	// taken after the locks were granted.
	b := &pgx.Batch{}
	bq := db.New(batchQueue{b})
	for _, i := range distinct {
		d := entries[i].d
		p := db.ReceiptInsertKeyedParams{
			ID: d.id, ScopeKind: string(s.Kind), ScopeID: s.ID,
			Source: d.identity.Source, Consumer: d.identity.Consumer, MessageID: d.identity.MessageID,
			EventType: d.eventType, SchemaVersion: d.schemaVersion, Fingerprint: d.fingerprint[:],
			Payload: d.payload, Metadata: d.metadata, MaxAttempts: d.maxAttempts, OrderingKey: d.orderingKey,
		}
		if distributed {
			_ = bq.ReceiptInsertKeyedRouted(ctx, db.ReceiptInsertKeyedRoutedParams(p))
			_ = bq.ReceiptSeqKeyedRouted(ctx, db.ReceiptSeqKeyedRoutedParams{ScopeID: s.ID, ID: d.id})
		} else {
			_, _ = bq.ReceiptInsertKeyed(ctx, p)
		}
		_, _ = bq.ReceiptQueueKeyed(ctx, db.ReceiptQueueKeyedParams{ScopeID: s.ID, ID: d.id})
	}
	consumers := make([]string, 0, len(distinct))
	for _, i := range distinct {
		consumers = append(consumers, entries[i].d.identity.Consumer)
	}
	// Wakes the workers at commit; for a duplicate too (the pipeline cannot
	// know before it runs), which wakes a worker that then finds nothing.
	_ = bq.ReceiptNotify(ctx, consumers)
	inserted := make(map[int]bool, len(distinct))
	br := tx.SendBatch(ctx, b)
	steps := 1 // the insert
	if distributed {
		steps = 2 // the insert, its number
	}
	for _, i := range distinct {
		for range steps {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return dbError("accept", err)
			}
		}
		// A queue row is inserted exactly when the receipt was.
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return dbError("accept", err)
		}
		inserted[i] = tag.RowsAffected() == 1
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return dbError("accept: waking the workers", err)
	}
	if err := br.Close(); err != nil {
		return dbError("accept", err)
	}

	holders := make(map[Identity]holder, len(distinct))
	var ex db.ReceiptsByIdentitiesRoutedParams
	for _, i := range distinct {
		d := entries[i].d
		if inserted[i] {
			holders[d.identity] = holder{id: d.id, status: StatusPending, fingerprint: d.fingerprint[:], insertedPos: i}
			continue
		}
		ex.Sources = append(ex.Sources, d.identity.Source)
		ex.Consumers = append(ex.Consumers, d.identity.Consumer)
		ex.MessageIds = append(ex.MessageIds, d.identity.MessageID)
	}
	if len(ex.Sources) > 0 {
		// ON CONFLICT waited for any concurrent inserter: their rows are committed.
		ex.ScopeKind, ex.ScopeID = string(s.Kind), s.ID
		rows, err := db.New(tx).ReceiptsByIdentitiesRouted(ctx, ex)
		if err != nil {
			return dbError("accept: reading the existing receipts", err)
		}
		for _, r := range rows {
			k := identityOf(r.ScopeKind, r.ScopeID, r.Source, r.Consumer, r.MessageID)
			holders[k] = holder{id: r.ID, status: liveStatus(r.Status), fingerprint: r.Fingerprint, insertedPos: -1}
		}
	}
	for i, e := range entries {
		h, ok := holders[e.d.identity]
		if !ok {
			return fmt.Errorf("pginbox: accept: the receipt of %s vanished while accepting: retry", e.d.identity)
		}
		set(e.pos, resolve(e.d, h, h.insertedPos == i))
	}
	return nil
}

// liveStatus is the status a caller sees for a work row's: a receipt that
// waits behind an earlier one of its key is PENDING.
func liveStatus(s string) Status {
	if s == statusBlocked {
		return StatusPending
	}
	return Status(s)
}

// statusBlocked is the work row status of a receipt waiting behind an
// earlier receipt of its ordering key. Callers see it as PENDING with
// Receipt.Blocked set.
const statusBlocked = "BLOCKED"

// itemResult turns the batch item of a single Accept into its result.
func itemResult(it BatchItem) (AcceptResult, error) {
	switch it.Outcome {
	case Accepted, Duplicate:
		return AcceptResult{Outcome: it.Outcome, ID: it.ID, Status: it.Status}, nil
	default:
		return AcceptResult{}, it.Err
	}
}
