package rabbitmq

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for deliveries a Publisher sent: the
// message-id property (the event ID) is the message ID, app-id the source,
// type and the schema-version header the event type and version, the
// metadata header the metadata. consumer names the receiving consumer; the
// Consumer sets the scope from its Config.
func DecodeEvent(consumer string) func(d amqp.Delivery) (inbox.Message, error) {
	return func(d amqp.Delivery) (inbox.Message, error) {
		if d.MessageId == "" {
			return inbox.Message{}, errors.New("no message-id property: was it published by a pginbox Publisher?")
		}
		v, ok := d.Headers[HeaderSchemaVersion].(int32)
		if !ok {
			return inbox.Message{}, fmt.Errorf("header %s is %T, want int32: was it published by a pginbox Publisher?", HeaderSchemaVersion, d.Headers[HeaderSchemaVersion])
		}
		var md map[string]string
		if t, ok := d.Headers[HeaderMetadata].(amqp.Table); ok {
			md = make(map[string]string, len(t))
			for k, v := range t {
				s, ok := v.(string)
				if !ok {
					return inbox.Message{}, fmt.Errorf("header %s: key %q is %T, want a string", HeaderMetadata, k, v)
				}
				md[k] = s
			}
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: d.AppId, Consumer: consumer, MessageID: d.MessageId},
			EventType:     d.Type,
			SchemaVersion: int(v),
			Payload:       d.Body,
			Metadata:      md,
		}, nil
	}
}
