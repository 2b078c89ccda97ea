package sqs

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for messages a Publisher sent: the
// source, type, version and metadata come from their attributes, the
// message ID from AttrMessageID (the Consumer fills it in). consumer names
// the receiving consumer; the Consumer sets the scope from its Config.
func DecodeEvent(consumer string) func(types.Message) (inbox.Message, error) {
	return func(m types.Message) (inbox.Message, error) {
		v, err := strconv.Atoi(stringAttr(m, AttrSchemaVersion))
		if err != nil {
			return inbox.Message{}, fmt.Errorf("attribute %s %q: want a decimal schema version: was it sent by a pginbox Publisher?", AttrSchemaVersion, stringAttr(m, AttrSchemaVersion))
		}
		var md map[string]string
		if s := stringAttr(m, AttrMetadata); s != "" {
			if err := json.Unmarshal([]byte(s), &md); err != nil {
				return inbox.Message{}, fmt.Errorf("attribute %s: want a JSON object of strings: %w", AttrMetadata, err)
			}
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: stringAttr(m, AttrSource), Consumer: consumer},
			EventType:     stringAttr(m, AttrEventType),
			SchemaVersion: v,
			Payload:       []byte(aws.ToString(m.Body)),
			Metadata:      md,
		}, nil
	}
}
