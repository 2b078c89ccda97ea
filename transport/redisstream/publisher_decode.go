package redisstream

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for entries a Publisher added: the
// source, type, version, metadata and payload come from their fields, the
// message ID from DefaultIDField (the Consumer fills it in). consumer names
// the receiving consumer; the Consumer sets the scope from its Config.
func DecodeEvent(consumer string) func(m redis.XMessage) (inbox.Message, error) {
	return func(m redis.XMessage) (inbox.Message, error) {
		str := func(f string) string { s, _ := m.Values[f].(string); return s }
		v, err := strconv.Atoi(str(FieldSchemaVersion))
		if err != nil {
			return inbox.Message{}, fmt.Errorf("field %s %q: want a decimal schema version: was it added by a pginbox Publisher?", FieldSchemaVersion, str(FieldSchemaVersion))
		}
		var md map[string]string
		if s := str(FieldMetadata); s != "" {
			if err := json.Unmarshal([]byte(s), &md); err != nil {
				return inbox.Message{}, fmt.Errorf("field %s: %w", FieldMetadata, err)
			}
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: str(FieldSource), Consumer: consumer},
			EventType:     str(FieldEventType),
			SchemaVersion: v,
			Payload:       json.RawMessage(str(FieldPayload)),
			Metadata:      md,
		}, nil
	}
}
