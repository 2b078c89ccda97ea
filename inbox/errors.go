package inbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/inboxtype"
)

// Every exported error of the package. Concrete error types match their
// sentinel with errors.Is, and carry details for errors.As.

// Accept errors.
var (
	// ErrInvalid matches every *ValidationError: the message was rejected and
	// nothing was stored. Redelivering it unchanged fails the same way.
	ErrInvalid = errors.New("pginbox: invalid message")

	// ErrIdentityConflict matches every *ConflictError.
	ErrIdentityConflict = errors.New("pginbox: " + CodeIdentityConflict)

	// ErrCommitUncertain means the connection failed after the accept was sent,
	// so whether it committed is unknown. Do not acknowledge the delivery: let
	// the transport redeliver, and the next Accept reconciles (Duplicate if it
	// committed).
	ErrCommitUncertain = errors.New("pginbox: commit outcome unknown: do not acknowledge, redeliver so the next accept reconciles")

	// ErrClientClosed is returned by calls on a Client after Close.
	ErrClientClosed = errors.New("pginbox: client is closed")
)

// Worker errors: the causes of a handler context's cancellation, also recorded
// as the receipt's error.
var (
	ErrLeaseLost      = errors.New("pginbox: lease lost: another worker recovered or re-claimed the receipt")
	ErrHandlerTimeout = errors.New("pginbox: handler deadline exceeded")
	ErrWorkerShutdown = errors.New("pginbox: worker shutting down")
)

// Admin errors.
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

// ErrInvalidConfig matches every *ConfigError.
var ErrInvalidConfig = errors.New("pginbox: invalid configuration")

// CodeIdentityConflict is the stable code of a ConflictError.
const CodeIdentityConflict = "IDENTITY_CONFLICT"

// Rule names the validation rule a message broke.
type Rule string

// Validation rules. Payload rules mirror the canonicalizer's.
const (
	RuleRequired        Rule = "required"
	RuleTooLong         Rule = "too_long"
	RuleControlChar     Rule = "control_character"
	RuleInvalidUTF8     Rule = "invalid_utf8"
	RuleOutOfRange      Rule = "out_of_range"
	RuleUndeclared      Rule = "undeclared_consumer"
	RuleInvalidJSON     Rule = "invalid_json"
	RuleDuplicateKey    Rule = "duplicate_key"
	RuleLoneSurrogate   Rule = "lone_surrogate"
	RuleNullCharacter   Rule = "null_character"
	RuleNumberRange     Rule = "number_out_of_range"
	RuleTooDeep         Rule = "too_deep"
	RuleTooLarge        Rule = "too_large"
	RuleNonFinite       Rule = "non_finite_number"
	RuleUnsupportedType Rule = "unsupported_value"
	RuleValidate        Rule = "validate"
)

// ValidationError reports a message (or an admin request) that breaks a rule.
// Nothing was stored.
type ValidationError struct {
	Field  string // e.g. "source", "scope.id", "payload"
	Rule   Rule   // the rule broken, for errors.As callers to branch on
	Detail string // what is wrong and how to fix it
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("pginbox: invalid %s (%s): %s", e.Field, e.Rule, e.Detail)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// ConflictError reports an identity that already exists with different content
// (event type, schema version or canonical payload). The existing receipt is
// untouched. Redelivering will not help: reject or dead-letter the delivery.
type ConflictError struct {
	Identity  Identity     // the message's identity
	ReceiptID inboxtype.ID // the existing receipt
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("pginbox: %s: %s already exists as receipt %s with different content; use a new message ID for new content",
		CodeIdentityConflict, e.Identity, e.ReceiptID)
}

// Code returns CodeIdentityConflict.
func (e *ConflictError) Code() string { return CodeIdentityConflict }

// Is makes errors.Is(err, ErrIdentityConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrIdentityConflict }

// ConfigError reports a configuration value that NewClient, NewWorker or
// NewAdmin refuses. Field is the Go field name, e.g. "WorkerConfig.Lease".
type ConfigError struct {
	Field  string // the Go field name, e.g. "WorkerConfig.Lease"
	Detail string // what is wrong and what is allowed
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("pginbox: invalid %s: %s", e.Field, e.Detail)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// VersionConflictError reports a requeue or replay whose expected version is
// not the receipt's current one: it changed since the caller read it. Nothing
// was changed.
type VersionConflictError struct {
	ReceiptID ID     // the receipt
	Action    string // "requeue" or "replay"
	Expected  int64  // the version the caller gave
	Current   int64  // the receipt's version now: retry with it if the action still applies
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
	ReceiptID ID       // the receipt
	Action    string   // e.g. "requeue", "replay", "skip"
	Found     Status   // its status
	Allowed   []Status // the statuses the action needs
	// Detail, when set, says more than the status does (for example that a
	// PROCESSING receipt's lease has not expired yet).
	Detail string
}

func (e *WrongStateError) Error() string {
	msg := fmt.Sprintf("pginbox: cannot %s receipt %s: it is %s, %s needs %s",
		e.Action, e.ReceiptID, e.Found, e.Action, joinStatuses(e.Allowed))
	switch {
	case e.Detail != "":
		msg += "; " + e.Detail
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
	ReceiptID ID        // the receipt
	PurgedAt  time.Time // when retention dropped its payload
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
