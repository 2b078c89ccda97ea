package kafka

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// deadLetter produces r to the dead-letter topic with the reason headers and
// waits for the broker's acknowledgement.
func (c *Consumer) deadLetter(ctx context.Context, cl *kgo.Client, r *kgo.Record, reason string, cause error, receipt string) error {
	headers := append([]kgo.RecordHeader(nil), r.Headers...)
	headers = append(headers,
		kgo.RecordHeader{Key: "pginbox-reason", Value: []byte(reason)},
		kgo.RecordHeader{Key: "pginbox-error", Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: "pginbox-topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "pginbox-partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "pginbox-offset", Value: []byte(strconv.FormatInt(r.Offset, 10))},
	)
	if receipt != "" {
		headers = append(headers, kgo.RecordHeader{Key: "pginbox-receipt", Value: []byte(receipt)})
	}
	dead := &kgo.Record{Topic: c.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value, Headers: headers, Timestamp: r.Timestamp}
	if err := cl.ProduceSync(ctx, dead).FirstErr(); err != nil {
		return fmt.Errorf("producing to %q (does the topic exist?): %w", c.cfg.DeadLetterTopic, err)
	}
	return nil
}
