package nats

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for messages a Publisher sent: the
// source, type, version and metadata come from their headers, the message
// ID from Nats-Msg-Id (the Consumer fills it in). consumer names the
// receiving consumer; the Consumer sets the scope from its Config.
func DecodeEvent(consumer string) func(m jetstream.Msg) (inbox.Message, error) {
	return func(m jetstream.Msg) (inbox.Message, error) {
		h := m.Headers()
		v, err := strconv.Atoi(h.Get(HeaderSchemaVersion))
		if err != nil {
			return inbox.Message{}, fmt.Errorf("header %s %q: want a decimal schema version: was it published by a pginbox Publisher?", HeaderSchemaVersion, h.Get(HeaderSchemaVersion))
		}
		var md map[string]string
		for k, vs := range h {
			if name, ok := strings.CutPrefix(k, HeaderMetadataPrefix); ok && len(vs) > 0 {
				if md == nil {
					md = map[string]string{}
				}
				md[name] = vs[0]
			}
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: h.Get(HeaderSource), Consumer: consumer},
			EventType:     h.Get(HeaderEventType),
			SchemaVersion: v,
			Payload:       m.Data(),
			Metadata:      md,
		}, nil
	}
}
