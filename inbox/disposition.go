package inbox

import "errors"

// Action is what a transport should do with a delivery after Accept.
type Action int

const (
	// ActionRetry: do not acknowledge; let the transport redeliver (storage
	// failure, uncertain commit, cancelled context, schema not migrated).
	ActionRetry Action = iota
	// ActionAck: acknowledge the delivery; the inbox owns processing now
	// (accepted or duplicate).
	ActionAck
	// ActionReject: reject or dead-letter the delivery; redelivering it unchanged
	// can never succeed (invalid message, identity conflict).
	ActionReject
)

func (a Action) String() string {
	switch a {
	case ActionAck:
		return "ack"
	case ActionReject:
		return "reject"
	default:
		return "retry"
	}
}

// ActionFor maps the error of Accept, AcceptTx or a batch item to what the
// transport should do, so transports never parse error strings.
func ActionFor(err error) Action {
	switch {
	case err == nil:
		return ActionAck
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrIdentityConflict):
		return ActionReject
	default:
		return ActionRetry
	}
}
