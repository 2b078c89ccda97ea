package otelinbox

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pginbox/pginbox/inbox"
)

// Attribute keys of pginbox's own (the messaging.* and error.type keys come
// from the OpenTelemetry semantic conventions).
const (
	AttrEventType     = attribute.Key("pginbox.event.type")    // "order.created"
	AttrSchemaVersion = attribute.Key("pginbox.event.version") // 1
	AttrScopeKind     = attribute.Key("pginbox.scope.kind")    // "tenant" or "global"
	AttrTenantID      = attribute.Key("pginbox.tenant.id")     // only with Config.RecordTenantID
	AttrSource        = attribute.Key("pginbox.source")        // the producer system
	AttrReceiptID     = attribute.Key("pginbox.receipt.id")    // spans only
	AttrAttempt       = attribute.Key("pginbox.attempt")       // spans only
	AttrPayload       = attribute.Key("pginbox.payload")       // only with Config.RecordPayload
	AttrAcceptOutcome = attribute.Key("pginbox.accept.outcome")
	AttrWorkerEvent   = attribute.Key("pginbox.worker.event") // an inbox.EventKind
	AttrStatus        = attribute.Key("pginbox.receipt.status")
	AttrRetryAt       = attribute.Key("pginbox.retry_at") // RFC 3339, retry spans
	AttrInvalidField  = attribute.Key("pginbox.invalid.field")
	AttrInvalidRule   = attribute.Key("pginbox.invalid.rule")
	AttrOutboxEventID = attribute.Key("pginbox.outbox.event.id") // emit and publish spans, publish links
	AttrPublishFailed = attribute.Key("pginbox.publish.failed")  // messages of a publish span not published
)

// Accept outcomes, the values of AttrAcceptOutcome.
const (
	OutcomeAccepted  = "accepted"
	OutcomeDuplicate = "duplicate"
	OutcomeConflict  = "conflict" // *inbox.ConflictError
	OutcomeInvalid   = "invalid"  // *inbox.ValidationError
	OutcomeError     = "error"    // storage failure or uncertain commit: the transport retries
)

// Operation names (messaging.operation.name); span names are the operation
// name and the consumer (the destination for emit and publish), e.g.
// "accept orders.projection.v1".
const (
	OpAccept   = "accept"
	OpProcess  = "process"
	OpComplete = "complete"
	OpRetry    = "retry"
	OpDead     = "dead"
	OpEmit     = "emit"    // outbox.Emit, EmitMiddleware
	OpPublish  = "publish" // a relay's Publish call, Publisher
)

// systemAttr is messaging.system for every span and metric.
var systemAttr = semconv.MessagingSystemKey.String("pginbox")

// consumerAttrs are the low-cardinality attributes metrics and spans share.
func consumerAttrs(consumer, eventType string, version int) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 6)
	kv = append(kv, systemAttr, semconv.MessagingDestinationName(consumer))
	if eventType != "" {
		kv = append(kv, AttrEventType.String(eventType), AttrSchemaVersion.Int(version))
	}
	return kv
}

// scopeAttrs describe a scope: its kind always, the tenant ID only when
// configured.
func (t *Telemetry) scopeAttrs(kv []attribute.KeyValue, s inbox.Scope) []attribute.KeyValue {
	if s.Kind != "" {
		kv = append(kv, AttrScopeKind.String(string(s.Kind)))
	}
	if t.cfg.RecordTenantID && s.Kind == inbox.ScopeTenant {
		kv = append(kv, AttrTenantID.String(s.ID))
	}
	return kv
}

func (t *Telemetry) messageIDAttr(kv []attribute.KeyValue, id string) []attribute.KeyValue {
	if t.cfg.RecordMessageID && id != "" {
		kv = append(kv, semconv.MessagingMessageID(id))
	}
	return kv
}

func operation(typ attribute.KeyValue, name string) []attribute.KeyValue {
	return []attribute.KeyValue{typ, semconv.MessagingOperationName(name)}
}
