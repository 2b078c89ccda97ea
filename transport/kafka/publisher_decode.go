package kafka

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
)

// DecodeEvent returns a Config.Decode for records a Publisher produced: the
// event ID header is the message ID, and the source, type, version and
// metadata come from their headers. consumer names the receiving consumer;
// the Consumer sets the scope from its Config.
func DecodeEvent(consumer string) func(r *kgo.Record) (inbox.Message, error) {
	return func(r *kgo.Record) (inbox.Message, error) {
		m := inbox.Message{Identity: inbox.Identity{Consumer: consumer}, Payload: r.Value}
		var version string
		for _, h := range r.Headers {
			v := string(h.Value)
			switch {
			case h.Key == HeaderEventID:
				m.MessageID = v
			case h.Key == HeaderEventType:
				m.EventType = v
			case h.Key == HeaderSchemaVersion:
				version = v
			case h.Key == HeaderSource:
				m.Source = v
			case strings.HasPrefix(h.Key, HeaderMetadataPrefix):
				if m.Metadata == nil {
					m.Metadata = map[string]string{}
				}
				m.Metadata[strings.TrimPrefix(h.Key, HeaderMetadataPrefix)] = v
			}
		}
		if m.MessageID == "" {
			return inbox.Message{}, fmt.Errorf("no %s header: was it produced by a pginbox Publisher?", HeaderEventID)
		}
		n, err := strconv.Atoi(version)
		if err != nil {
			return inbox.Message{}, fmt.Errorf("header %s %q: want a decimal schema version", HeaderSchemaVersion, version)
		}
		m.SchemaVersion = n
		return m, nil
	}
}
