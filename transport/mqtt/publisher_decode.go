package mqtt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for messages a Publisher sent: the
// message ID is the "message-id" user property (the event ID), the source,
// type, version and metadata come from the other pginbox-* user
// properties. consumer names the receiving consumer; the Consumer sets the
// scope from its Config.
func DecodeEvent(consumer string) func(*paho.Publish) (inbox.Message, error) {
	return func(pb *paho.Publish) (inbox.Message, error) {
		var props paho.UserProperties
		if pb.Properties != nil {
			props = pb.Properties.User
		}
		id := props.Get(DefaultIDProperty)
		if id == "" {
			return inbox.Message{}, fmt.Errorf("no %s user property: was it published by a pginbox Publisher?", DefaultIDProperty)
		}
		v, err := strconv.Atoi(props.Get(PropertySchemaVersion))
		if err != nil {
			return inbox.Message{}, fmt.Errorf("user property %s %q: want a decimal schema version: was it published by a pginbox Publisher?", PropertySchemaVersion, props.Get(PropertySchemaVersion))
		}
		var md map[string]string
		for _, u := range props {
			if k, ok := strings.CutPrefix(u.Key, PropertyMetadataPrefix); ok {
				if md == nil {
					md = map[string]string{}
				}
				md[k] = u.Value
			}
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: props.Get(PropertySource), Consumer: consumer, MessageID: id},
			EventType:     props.Get(PropertyEventType),
			SchemaVersion: v,
			Payload:       pb.Payload,
			Metadata:      md,
		}, nil
	}
}
