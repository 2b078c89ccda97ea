package inbox

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pginbox/pginbox/internal/canonjson"
)

// FuzzMessage feeds arbitrary identities and payloads to the validation that
// runs before anything touches the database: it must never panic, every
// rejection must be a *ValidationError naming a field and rule, and an accepted
// payload's canonical form must be a fixed point.
func FuzzMessage(f *testing.F) {
	f.Add("tenant-a", "orders-service", "orders.projection.v1", "evt-1", "order.created", 1, []byte(`{"orderId":"o-1","total":10.50}`))
	f.Add("", "s", "c", "m", "e", 1, []byte(`[]`))
	f.Add("t", "s\x00", "c", "m", "e", 0, []byte(`{"a":1,"a":2}`))
	f.Add("t", "s", "c\xff", "m", "e", 2, []byte(`{"a":"\ud800"}`))
	f.Add("t", "s", "c", "m", "e", 1, []byte(`{"a":"\u0000"}`))
	f.Add("t", "s", "c", "m", "e", 1, []byte(`1e999999`))
	f.Add("t", "s", "c", "m", "e", 1, []byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`))
	f.Add("t", "s", "c", "m", "e", 1, []byte(`{"b":[1,2,{"z":null,"a":true}],"a":-0.0e-5}`))
	f.Add("t", "s", "c", "m", "e", 1, []byte("\"\xed\xa0\x80\""))

	c := &Client{cfg: Config{}.withDefaults()}
	c.limits = canonjson.Limits{MaxDepth: c.cfg.MaxPayloadDepth, MaxBytes: c.cfg.MaxPayloadBytes}
	f.Fuzz(func(t *testing.T, tenant, source, consumer, messageID, eventType string, version int, payload []byte) {
		msg := Message{
			Identity:      Identity{Scope: Tenant(tenant), Source: source, Consumer: consumer, MessageID: messageID},
			EventType:     eventType,
			SchemaVersion: version,
			Payload:       json.RawMessage(payload),
		}
		p, err := c.prepare(msg)
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) || verr.Field == "" || verr.Rule == "" {
				t.Fatalf("rejection is not a complete *ValidationError: %#v", err)
			}
			if ActionFor(err) != ActionReject {
				t.Fatalf("invalid input must be rejected, got %v", ActionFor(err))
			}
			return
		}
		again, err := canonicalize(json.RawMessage(p.Payload), c.limits)
		if err != nil {
			t.Fatalf("canonical form rejected on a second pass: %v", err)
		}
		if string(again) != p.Payload {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", p.Payload, again)
		}
		if !json.Valid(again) {
			t.Fatalf("canonical form is not valid JSON: %s", again)
		}
	})
}
