package outbox

// Status is an event's publishing state.
type Status string

const (
	// StatusPending: waiting to be published, now or after a retry delay.
	StatusPending Status = "PENDING"
	// StatusPublishing: claimed by a relay that is publishing it.
	StatusPublishing Status = "PUBLISHING"
	// StatusPublished: a Publisher confirmed it.
	StatusPublished Status = "PUBLISHED"
	// StatusDead: its attempts are spent or its error was permanent; an
	// operator requeues it.
	StatusDead Status = "DEAD"
)
