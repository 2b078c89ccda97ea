package inbox

import (
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/inboxtype"
)

// ErrInvalid matches every *ValidationError: the message was rejected and nothing
// was stored. Redelivering it unchanged fails the same way.
var ErrInvalid = errors.New("pginbox: invalid message")

// ErrIdentityConflict matches every *ConflictError.
var ErrIdentityConflict = errors.New("pginbox: " + CodeIdentityConflict)

// ErrCommitUncertain means the connection failed after the accept was sent, so
// whether it committed is unknown. Do not acknowledge the delivery: let the
// transport redeliver, and the next Accept reconciles (Duplicate if it committed).
var ErrCommitUncertain = errors.New("pginbox: commit outcome unknown: do not acknowledge, redeliver so the next accept reconciles")

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

// ValidationError reports a message that breaks a rule. Nothing was stored.
type ValidationError struct {
	Field  string // e.g. "source", "scope.id", "payload"
	Rule   Rule
	Detail string
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
	Identity  Identity
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

func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}
