package bullmq

// keys are a queue's Redis keys in BullMQ's data model: "<prefix>:<queue>:"
// followed by the part's name, and the job ID for a job's hash.
type keys struct {
	base                                     string // "<prefix>:<queue>:", the prefix of job keys
	wait, paused, active, prioritized, delay string
	completed, failed, stalled, meta, events string
	marker, priorityCounter                  string
}

func queueKeys(prefix, queue string) keys {
	b := prefix + ":" + queue + ":"
	return keys{
		base:            b,
		wait:            b + "wait",
		paused:          b + "paused",
		active:          b + "active",
		prioritized:     b + "prioritized",
		delay:           b + "delayed",
		completed:       b + "completed",
		failed:          b + "failed",
		stalled:         b + "stalled",
		meta:            b + "meta",
		events:          b + "events",
		marker:          b + "marker",
		priorityCounter: b + "pc",
	}
}
