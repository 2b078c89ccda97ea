package inbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/db"
)

// Receipt is a stored receipt as the admin API shows it.
type Receipt struct {
	ID            ID     // the receipt's own ID (a replay has a new one)
	Scope         Scope  // with Source, Consumer and MessageID, the identity
	Source        string // the producer system
	Consumer      string // the logical effect, e.g. "orders.projection.v1"
	MessageID     string // the producer's event ID
	EventType     string // with SchemaVersion, the payload's shape
	SchemaVersion int    // the payload's schema version
	// Fingerprint is the SHA-256 content fingerprint (see Fingerprint).
	Fingerprint []byte
	// Payload is the canonical JSON payload. It is nil when purged, and List
	// does not load it (use Get).
	Payload json.RawMessage
	// Metadata is nil when empty, and in List results.
	Metadata map[string]string

	Status      Status // the live status (the work row's while it has one)
	Attempts    int    // attempts started, this retry budget
	MaxAttempts int    // the retry budget: DEAD after this many failed attempts
	// AvailableAt is when the receipt is (or was) due for its next attempt;
	// zero once it is COMPLETED.
	AvailableAt    time.Time
	LeaseExpiresAt *time.Time // while PROCESSING: when recovery may take it back
	LastError      string     // the last failed attempt's error; "" for none

	CreatedAt   time.Time  // when Accept (or a replay) stored it
	UpdatedAt   time.Time  // its last change
	CompletedAt *time.Time // nil until COMPLETED
	// Version grows with every change; requeue and replay take it as their
	// expected version.
	Version int64
	// ReplayOf is the receipt this one replays; zero for an original.
	ReplayOf ID
	// PayloadPurgedAt is when retention dropped the payload; nil while kept.
	PayloadPurgedAt *time.Time
	// OrderingKey is the message's ordering key ("" for none) and
	// OrderingSeq its place among the receipts of its consumer, scope and key.
	OrderingKey string
	OrderingSeq int64
	// Blocked reports a PENDING receipt that waits behind an earlier receipt
	// of its ordering key (unfinished, or DEAD: see AdminView.Skip).
	Blocked bool
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
	// KeyBlocked is the number of later receipts of its ordering key (same
	// consumer and scope) that wait, BLOCKED, for an earlier one: for a DEAD
	// receipt that holds its key, the receipts it holds back until it is
	// requeued or skipped. Zero without a key, and once COMPLETED.
	KeyBlocked int64
}

// ReplaySummary is one receipt created by a replay.
type ReplaySummary struct {
	ID          ID         // the replay's receipt
	Status      Status     // its live status
	Version     int64      // its version
	CreatedAt   time.Time  // when the replay created it
	CompletedAt *time.Time // nil until COMPLETED
}

// Audit actions.
const (
	AuditRequeue = "requeue"
	AuditReplay  = "replay"
	AuditSkip    = "skip"
)

// AuditEntry is one audited admin action. From and To describe ReceiptID's
// row: a requeue moves it to PENDING; a replay leaves the original COMPLETED
// (only its version moves) and names the receipt it created in NewReceiptID.
type AuditEntry struct {
	ID           int64     // the pginbox_audit row
	ReceiptID    ID        // the receipt acted on
	Action       string    // AuditRequeue, AuditReplay or AuditSkip
	Actor        string    // who asked for it, as the caller named them
	Reason       string    // why, as the caller said
	FromStatus   Status    // the receipt's status before
	ToStatus     Status    // and after
	FromVersion  int64     // the receipt's version before
	ToVersion    int64     // and after
	NewReceiptID ID        // replays only
	CreatedAt    time.Time // when the action committed
}

func receiptFromRow(row db.PginboxReceiptsLive) (Receipt, error) {
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
		LeaseExpiresAt:  row.LeaseExpiresAt,
		CreatedAt:       row.CreatedAt,
		UpdatedAt:       row.UpdatedAt,
		CompletedAt:     row.CompletedAt,
		Version:         row.Version,
		ReplayOf:        row.ReplayOf,
		PayloadPurgedAt: row.PayloadPurgedAt,
		Blocked:         row.Blocked,
	}
	if row.OrderingKey != nil {
		r.OrderingKey = *row.OrderingKey
	}
	if row.OrderingSeq != nil {
		r.OrderingSeq = *row.OrderingSeq
	}
	if row.AvailableAt != nil {
		r.AvailableAt = *row.AvailableAt
	}
	if row.Payload != nil {
		r.Payload = json.RawMessage(*row.Payload)
	}
	if row.LastError != nil {
		r.LastError = *row.LastError
	}
	if row.Metadata != "" && row.Metadata != "{}" {
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
