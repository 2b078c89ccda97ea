package outbox

import "errors"

// Admin errors. Each is wrapped with the details; match with errors.Is.
var (
	// ErrNotFound: no event with that ID (never emitted, or purged).
	ErrNotFound = errors.New("pginbox: outbox event not found")
	// ErrVersionConflict: the event changed since the caller read it.
	// Nothing was changed.
	ErrVersionConflict = errors.New("pginbox: outbox event version conflict")
	// ErrWrongState: the event's status does not allow the action. Nothing
	// was changed.
	ErrWrongState = errors.New("pginbox: outbox event in the wrong state")
)
