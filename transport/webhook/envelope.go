package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/pginbox/pginbox/inbox"
)

// Envelope is a ready Decode for bodies shaped like
//
//	{"id": "evt-1", "type": "order.created", "version": 1, "data": {...}}
//
// for the given source and consumer. id is the message ID (with
// Config.IdempotencyKey the header replaces it and id may be left out);
// version defaults to 1; data is the payload, kept as the exact JSON text.
func Envelope(source, consumer string) func(body []byte, h http.Header) (inbox.Message, error) {
	return func(body []byte, _ http.Header) (inbox.Message, error) {
		var e struct {
			ID      string          `json:"id"`
			Type    string          `json:"type"`
			Version int             `json:"version"`
			Data    json.RawMessage `json:"data"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return inbox.Message{}, fmt.Errorf(`want {"id", "type", "version", "data"}: %w`, err)
		}
		if len(e.Data) == 0 {
			return inbox.Message{}, fmt.Errorf(`"data" is missing: put the event payload there`)
		}
		if e.Version == 0 {
			e.Version = 1
		}
		return inbox.Message{
			Identity:      inbox.Identity{Source: source, Consumer: consumer, MessageID: e.ID},
			EventType:     e.Type,
			SchemaVersion: e.Version,
			Payload:       e.Data,
		}, nil
	}
}
