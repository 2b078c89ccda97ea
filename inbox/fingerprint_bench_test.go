package inbox

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pginbox/pginbox/internal/canonjson"
)

// benchPayload is an order event of the reference benchmark's size (265 bytes),
// deliberately not in canonical form (keys unsorted, spaces), as a webhook body
// would arrive.
const benchPayload = `{"orderId": "ord_000000001234", "placedAt": "2026-10-28T12:00:00Z", "customerId": "cus_0000001234",
 "items": [{"sku": "SKU-000123", "qty": 2}, {"sku": "SKU-000456", "qty": 1}], "currency": "EUR", "amount": "12345.67", "note": "xxxxxxxxxx"}`

func benchClient(b *testing.B) *Client {
	b.Helper()
	cfg := Config{}.withDefaults()
	return &Client{cfg: cfg, limits: limitsOf(cfg)}
}

func limitsOf(cfg Config) canonjson.Limits {
	return canonjson.Limits{MaxDepth: cfg.MaxPayloadDepth, MaxBytes: cfg.MaxPayloadBytes}
}

func benchMessage(payload any) Message {
	return Message{
		Identity: Identity{
			Scope:     Tenant("tenant-a"),
			Source:    "orders-service",
			Consumer:  "orders.projection.v1",
			MessageID: "evt-0000000001",
		},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       payload,
		Metadata:      map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
}

// BenchmarkFingerprint is the SHA-256 over the framed canonical payload alone.
func BenchmarkFingerprint(b *testing.B) {
	canon, err := canonicalize(json.RawMessage(benchPayload), limitsOf(Config{}.withDefaults()))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(canon)))
	for b.Loop() {
		Fingerprint("order.created", 1, canon)
	}
}

// BenchmarkPrepare is everything Accept does before the database: identity and
// metadata checks, canonicalization, fingerprint and receipt ID.
func BenchmarkPrepare(b *testing.B) {
	c := benchClient(b)
	for _, tc := range []struct {
		name    string
		payload any
	}{
		{"raw-json", json.RawMessage(benchPayload)},
		{"go-value", map[string]any{
			"orderId": "ord_000000001234", "placedAt": "2026-10-28T12:00:00Z", "customerId": "cus_0000001234",
			"items":    []map[string]any{{"sku": "SKU-000123", "qty": 2}, {"sku": "SKU-000456", "qty": 1}},
			"currency": "EUR", "amount": "12345.67", "note": "xxxxxxxxxx",
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			msg := benchMessage(tc.payload)
			b.ReportAllocs()
			b.SetBytes(int64(len(benchPayload)))
			for b.Loop() {
				if _, err := c.prepare(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrepareBatch is AcceptBatch's client-side work for 100 messages.
func BenchmarkPrepareBatch(b *testing.B) {
	c := benchClient(b)
	msgs := make([]Message, 100)
	for i := range msgs {
		msgs[i] = benchMessage(json.RawMessage(benchPayload))
		msgs[i].MessageID = fmt.Sprintf("evt-%010d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, valid := c.prepareBatch(msgs); len(valid) != len(msgs) {
			b.Fatal("invalid message in the batch")
		}
	}
}
