package bullmq

import (
	"encoding/json"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for jobs a Publisher added: the
// message ID, source, type, version, metadata and payload come from the
// job's EventData. consumer names the receiving consumer; the Consumer sets
// the scope from its Config.
func DecodeEvent(consumer string) func(Job) (inbox.Message, error) {
	return func(j Job) (inbox.Message, error) {
		var d EventData
		if err := json.Unmarshal(j.Data, &d); err != nil {
			return inbox.Message{}, fmt.Errorf("job data: %w: was it added by a pginbox Publisher?", err)
		}
		if d.EventType == "" || d.SchemaVersion == 0 || len(d.Payload) == 0 {
			return inbox.Message{}, fmt.Errorf("job data lacks eventType, schemaVersion or payload: was it added by a pginbox Publisher?")
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: d.Source, Consumer: consumer, MessageID: d.EventID},
			EventType:     d.EventType,
			SchemaVersion: d.SchemaVersion,
			Payload:       d.Payload,
			Metadata:      d.Metadata,
		}, nil
	}
}
