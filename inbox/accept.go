package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// accept1 is Accept without middleware.
func (c *Client) accept1(ctx context.Context, msg Message) (AcceptResult, error) {
	d, err := c.prepare(msg)
	if err != nil {
		return AcceptResult{}, err
	}
	if c.closed.Load() {
		return AcceptResult{}, ErrClientClosed
	}
	if c.group != nil {
		// A batch with keyed messages runs as one transaction that takes
		// their keys' locks.
		return c.group.accept(ctx, d)
	}
	var it BatchItem
	if err := c.acceptOwn(ctx, "accept", []batchEntry{{d: d}}, func(_ int, i BatchItem) { it = i }); err != nil {
		return AcceptResult{}, err
	}
	return itemResult(it)
}

// acceptTx is AcceptTx without middleware.
func (c *Client) acceptTx(ctx context.Context, tx pgx.Tx, msg Message) (AcceptResult, error) {
	d, err := c.prepare(msg)
	if err != nil {
		return AcceptResult{}, err
	}
	var it BatchItem
	if err := c.acceptIn(ctx, tx, "accept", []batchEntry{{d: d}}, func(_ int, i BatchItem) { it = i }); err != nil {
		return AcceptResult{}, err
	}
	return itemResult(it)
}

// draft is a validated message with everything a new receipt stores.
type draft = driver.Draft

// prepare validates msg and computes everything stored with it.
func (c *Client) prepare(msg Message) (*draft, error) {
	if err := validateIdentity(msg.Identity); err != nil {
		return nil, err
	}
	if c.declared != nil && !c.declared[msg.Consumer] {
		return nil, &ValidationError{Field: "consumer", Rule: RuleUndeclared,
			Detail: fmt.Sprintf("%q is not in Config.Consumers; add it there or fix the name", msg.Consumer)}
	}
	if err := validateString("event_type", msg.EventType); err != nil {
		return nil, err
	}
	if err := validateSchemaVersion(msg.SchemaVersion); err != nil {
		return nil, err
	}
	if msg.OrderingKey != "" {
		if err := validateString("ordering_key", msg.OrderingKey); err != nil {
			return nil, err
		}
	}
	canon, err := canonicalize(msg.Payload, c.limits)
	if err != nil {
		return nil, err
	}
	md, err := encodeMetadata(msg.Metadata, c.cfg.MaxMetadataBytes)
	if err != nil {
		return nil, err
	}
	return &draft{
		ID:            inboxtype.New(),
		Identity:      msg.Identity,
		EventType:     msg.EventType,
		SchemaVersion: int32(msg.SchemaVersion),
		Fingerprint:   Fingerprint(msg.EventType, msg.SchemaVersion, canon),
		Payload:       string(canon),
		Metadata:      md,
		MaxAttempts:   int32(c.cfg.MaxAttempts),
		OrderingKey:   msg.OrderingKey,
	}, nil
}

// itemResult turns the batch item of a single Accept into its result.
func itemResult(it BatchItem) (AcceptResult, error) {
	switch it.Outcome {
	case Accepted, Duplicate:
		return AcceptResult{Outcome: it.Outcome, ID: it.ID, Status: it.Status}, nil
	default:
		return AcceptResult{}, it.Err
	}
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
