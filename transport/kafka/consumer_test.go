package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

// Offsets are committed once the batch is stored; the producer's repeats
// are duplicates, applied once.
func TestCommitAfterAcceptBatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	pool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, pool, testConsumer)
	sent := r.produceAll(t, "evt", 60, 3)
	for i, id := range sent[:20] { // the producer sent these twice
		r.produce(t, int32(i)%3, id, fmt.Sprintf(`{"n":%d}`, i))
	}
	acc := &outcomes{Accepter: newClient(t, pool)}
	cfg := r.config(t)
	cfg.MaxBatch = 16
	c, err := kafka.NewConsumer(acc, cfg)
	must(t, err)
	stop := run(t, c)
	drill.Eventually(t, 30*time.Second, "every offset committed", func() bool { return r.committedAll(t) })
	stop()
	if acc.get(inbox.Accepted) != 60 || acc.get(inbox.Duplicate) != 20 {
		t.Fatalf("outcomes %v, want 60 accepted and 20 duplicates", acc.counts)
	}
	if s := c.Stats(); s.Acked != 80 || s.DeadLettered != 0 || s.Rewinds != 0 {
		t.Fatalf("stats %+v", s)
	}
	ledger.Report(t, "kafka commit-after-batch", sent, c.Stats().Acked)
}

// The changed-redelivery drill: the same message ID with different content,
// an invalid payload and an undecodable record go to the dead-letter topic
// with the reason in headers, the offset passes them, and the stored receipt
// does not change.
func TestDrillChangedRedelivery(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	pool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, pool, testConsumer)
	c, err := kafka.NewConsumer(newClient(t, pool), r.config(t))
	must(t, err)
	run(t, c)

	r.produce(t, 0, "evt-1", `{"total":"10.00"}`)
	drill.Eventually(t, 30*time.Second, "the original committed", func() bool { return r.committedAll(t) })
	var before string
	must(t, pool.QueryRow(context.Background(), "SELECT to_jsonb(r)::text FROM pginbox_receipts_live r").Scan(&before))
	var id inbox.ID
	must(t, pool.QueryRow(context.Background(), "SELECT id FROM pginbox_receipts_live").Scan(&id))

	r.produce(t, 0, "evt-1", `{"total":"99.00"}`) // changed redelivery
	r.produce(t, 0, "evt-2", `{"a":1,"a":2}`)     // invalid: duplicate key
	r.produce(t, 0, "", `{"n":3}`)                // no ID: Decode fails
	r.produce(t, 0, "evt-3", `{"n":4}`)           // and the stream goes on
	drill.Eventually(t, 30*time.Second, "the offset past all five", func() bool { return r.committedAll(t) })

	reasons := map[string]string{}
	for _, d := range r.dead(t, 3) {
		reasons[header(d, idHeader)] = header(d, "pginbox-reason")
		if header(d, "pginbox-error") == "" || header(d, "pginbox-topic") != topic || header(d, "pginbox-offset") == "" {
			t.Errorf("dead letter without origin or error headers: %v", d.Headers)
		}
		if header(d, "pginbox-reason") == kafka.ReasonConflict {
			if header(d, "pginbox-receipt") != id.String() || !strings.Contains(header(d, "pginbox-error"), inbox.CodeIdentityConflict) || string(d.Value) != `{"total":"99.00"}` {
				t.Errorf("conflict dead letter %v %s: want receipt %s and the changed value", d.Headers, d.Value, id)
			}
		}
	}
	want := map[string]string{"evt-1": kafka.ReasonConflict, "evt-2": kafka.ReasonInvalid, "": kafka.ReasonDecode}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("dead-letter reasons %v, want %v", reasons, want)
	}
	var after string
	must(t, pool.QueryRow(context.Background(), "SELECT to_jsonb(r)::text FROM pginbox_receipts_live r WHERE id = $1", id).Scan(&after))
	if after != before {
		t.Fatalf("the changed redelivery touched the receipt:\n%s\n%s", before, after)
	}
	ledger.Report(t, "kafka changed-redelivery", []string{"evt-1", "evt-3"}, c.Stats().Acked)
}

// A dead letter that cannot be produced stops the partition's offset before
// its record: the records before it are committed, it and the rest are
// re-read.
func TestDeadLetterFailureStopsOffset(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	pool := drill.Pool(t, testDSN(t), nil)
	r.produce(t, 0, "evt-0", `{"n":0}`)
	r.produce(t, 0, "evt-1", `{"n":1}`)
	r.produce(t, 0, "evt-2", `{"a":1,"a":2}`) // invalid
	r.produce(t, 0, "evt-3", `{"n":3}`)
	cfg := r.config(t)
	cfg.DeadLetterTopic = "missing.dead" // does not exist; kfake does not create topics
	cfg.AcceptTimeout = 500 * time.Millisecond
	c, err := kafka.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	stop := run(t, c)
	drill.Eventually(t, 30*time.Second, "two rewinds", func() bool { return c.Stats().Rewinds >= 2 })
	stop()
	if got := r.committed(t)[0]; got != 2 {
		t.Fatalf("committed offset %d, want 2 (before the record whose dead letter failed)", got)
	}
	if c.Stats().DeadLettered != 0 {
		t.Fatalf("stats %+v", c.Stats())
	}
}

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	good := kafka.Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"t"}, Group: "g", Scope: inbox.Global(), Decode: decode, DeadLetterTopic: "t.dead"}
	tests := []struct {
		name   string
		change func(*kafka.Config)
		want   string
	}{
		{"no brokers", func(c *kafka.Config) { c.Brokers = nil }, "Config.Brokers: is empty"},
		{"no topics", func(c *kafka.Config) { c.Topics = nil }, "Config.Topics: is empty"},
		{"no group", func(c *kafka.Config) { c.Group = "" }, "Config.Group: is empty"},
		{"no scope", func(c *kafka.Config) { c.Scope = inbox.Scope{} }, "Config.Scope: is unset"},
		{"no decode", func(c *kafka.Config) { c.Decode = nil }, "Config.Decode: is nil"},
		{"no dead-letter topic", func(c *kafka.Config) { c.DeadLetterTopic = "" }, "Config.DeadLetterTopic: is empty"},
		{"dead-letter topic consumed", func(c *kafka.Config) { c.DeadLetterTopic = "t" }, "is also in Config.Topics"},
		{"negative delivery limit", func(c *kafka.Config) { c.DeliveryLimit = -1 }, "Config.DeliveryLimit: is -1: it must be at least 1"},
		{"negative batch", func(c *kafka.Config) { c.MaxBatch = -1 }, "Config.MaxBatch"},
		{"retry delay above max", func(c *kafka.Config) { c.RetryDelay, c.MaxRetryDelay = time.Minute, time.Second }, "Config.RetryDelay"},
		{"negative accept timeout", func(c *kafka.Config) { c.AcceptTimeout = -1 }, "Config.AcceptTimeout"},
	}
	for _, tc := range tests {
		cfg := good
		tc.change(&cfg)
		if _, err := kafka.NewConsumer(&inbox.Client{}, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := kafka.NewConsumer(nil, good); err == nil {
		t.Error("NewConsumer accepted a nil accepter")
	}
}
