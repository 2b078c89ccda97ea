package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
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
	if err := c.acceptOwn(ctx, "accept batch", valid, func(i int, it BatchItem) { items[i] = it }); err != nil {
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
	if err := c.acceptIn(ctx, tx, "accept batch", valid, func(i int, it BatchItem) { items[i] = it }); err != nil {
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
