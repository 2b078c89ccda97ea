package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/pginbox/pginbox/inbox"
)

// depthTarget paces producers: a producer sends only what keeps the due
// backlog (the last poll plus what was sent since it began) at the target.
type depthTarget struct {
	target int64
	due    atomic.Int64 // at the last poll
	sent   atomic.Int64 // messages sent or being sent, ever
	atPoll atomic.Int64 // sent when the last poll began
	polled atomic.Bool
}

// reserve returns how many messages a producer may send now, at most n, and
// counts them as sent.
func (d *depthTarget) reserve(n int) int {
	if !d.polled.Load() {
		return 0
	}
	for {
		sent := d.sent.Load()
		missing := d.target - (d.due.Load() + sent - d.atPoll.Load())
		if missing <= 0 {
			return 0
		}
		k := int(min(missing, int64(n)))
		if d.sent.CompareAndSwap(sent, sent+int64(k)) {
			return k
		}
	}
}

// ingestCall sends msgs through the accept path of via and returns how many
// were accepted; anything but Accepted is an error here (identities are new).
func (s *suite) ingestCall(ctx context.Context, client *inbox.Client, via ingestVia, msgs []inbox.Message) (int, error) {
	if via == viaAccept {
		res, err := client.Accept(ctx, msgs[0])
		if err != nil {
			return 0, err
		}
		if res.Outcome != inbox.Accepted {
			return 0, fmt.Errorf("%s: outcome %s, want accepted", msgs[0].MessageID, res.Outcome)
		}
		return 1, nil
	}
	items, err := client.AcceptBatch(ctx, msgs)
	if err != nil {
		return 0, err
	}
	for i, it := range items {
		if it.Outcome != inbox.Accepted {
			return 0, fmt.Errorf("%s: outcome %s, want accepted (%v)", msgs[i].MessageID, it.Outcome, it.Err)
		}
	}
	return len(items), nil
}
