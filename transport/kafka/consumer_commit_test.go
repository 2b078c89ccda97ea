package kafka_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

// The broker refuses the offset commit of the only batch, as a broker
// restarted after a crash does (ILLEGAL_GENERATION: it lost the group's
// members). The consumer commits again without waiting for more records:
// else the accepted records stay uncommitted, and are read again by the
// next consumer, for as long as the topic is quiet (seen in the
// conformance broker-restart case with a SIGKILLed broker).
func TestRefusedCommitIsRetried(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	pool := drill.Pool(t, testDSN(t), nil)
	var refused atomic.Int32
	// Handling a request drops the control function: only the first
	// commit is refused.
	r.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		refused.Add(1)
		req := kr.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.IllegalGeneration.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	r.produce(t, 0, "evt-1", `{"n":1}`)
	c, err := kafka.NewConsumer(&outcomes{Accepter: newClient(t, pool)}, r.config(t))
	must(t, err)
	run(t, c)
	drill.Eventually(t, 20*time.Second, "the refused offset committed again", func() bool { return r.committedAll(t) })
	if refused.Load() != 1 {
		t.Fatalf("%d commits refused, want 1", refused.Load())
	}
}
