package sqs

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
)

// On a FIFO queue the deduplication ID is the event ID and the group the
// ordering key (the event ID without one); standard queues get neither.
func TestInputFIFOIDs(t *testing.T) {
	p, err := NewPublisher(PublisherConfig{Client: &sendRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	id := inboxtype.New()
	for _, tc := range []struct {
		url, key, group, dedup string
	}{
		{"http://h/1/orders.fifo", "order-7", "order-7", id.String()},
		{"http://h/1/orders.fifo", "", id.String(), id.String()},
		{"http://h/1/orders", "order-7", "", ""},
	} {
		in, err := p.input(outbox.Message{ID: id, Destination: tc.url, OrderingKey: tc.key, SchemaVersion: 1, Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(in.MessageGroupId) != tc.group || aws.ToString(in.MessageDeduplicationId) != tc.dedup {
			t.Errorf("%s key %q: group %q dedup %q, want %q and %q", tc.url, tc.key,
				aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId), tc.group, tc.dedup)
		}
		if got := aws.ToString(in.MessageAttributes[AttrMessageID].StringValue); got != id.String() {
			t.Errorf("%s: %s = %q, want the event ID", tc.url, AttrMessageID, got)
		}
	}
}

type sendRecorder struct{ SendAPI }
