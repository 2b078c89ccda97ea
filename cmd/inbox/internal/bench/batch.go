package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/pginbox/pginbox/inbox"
)

func (s *suite) acceptBatch(ctx context.Context) *Result {
	bs, calls, workers := s.o.BatchSize, s.o.Batches, s.o.Concurrency
	r := &Result{
		Scenario:    ScenarioAcceptBatch,
		Description: fmt.Sprintf("AcceptBatch of %d unique events per call (one statement, one commit)", bs),
		Concurrency: workers, Rounds: s.o.Rounds,
		Target: ">= 0.80 x raw multi-row insert ceiling", OK: true, Failures: []string{},
	}
	var pg, raw sample
	for round := range s.o.Rounds {
		order := []string{"pginbox", "raw"}
		if round%2 == 1 {
			order = []string{"raw", "pginbox"}
		}
		for _, side := range order {
			if err := s.reset(ctx, 0); err != nil {
				r.failf("%v", err)
				return r
			}
			label := fmt.Sprintf("%s %s round %d/%d", ScenarioAcceptBatch, side, round+1, s.o.Rounds)
			var got sample
			var accepted int
			var err error
			if side == "pginbox" {
				got, accepted, err = s.pginboxBatch(ctx, label, round, calls, bs, workers)
			} else {
				got, accepted, err = s.rawBatch(ctx, label, round, calls, bs, workers)
			}
			if err != nil {
				r.failf("%s: %v", side, err)
				return r
			}
			c, err := s.counts(ctx)
			if err != nil {
				r.failf("%v", err)
				return r
			}
			if accepted != got.calls || c.receipts != got.calls {
				r.failf("%s: %d messages gave %d accepted, the database holds %d receipts", side, got.calls, accepted, c.receipts)
			}
			if side == "pginbox" {
				pg.add(got)
				r.Counts.Accepted += accepted
				r.Counts.ReceiptsInDB = c.receipts
			} else {
				raw.add(got)
				r.Counts.RawAccepted += accepted
			}
		}
	}
	s.finish(r, pg, raw, "the same multi-row INSERT ... SELECT unnest statement from a plain pgx loop")
	r.MeetsTarget = r.Ratio >= 0.8
	r.Verified = fmt.Sprintf("%s messages in %s batches: %s accepted, %d errors; raw: %s inserted",
		thousands(pg.calls), thousands(pg.calls/bs), thousands(r.Counts.Accepted), r.Errors, thousands(r.Counts.RawAccepted))
	return r
}

func (s *suite) pginboxBatch(ctx context.Context, label string, round, calls, bs, workers int) (sample, int, error) {
	pool, err := newPool(ctx, s.base, workers)
	if err != nil {
		return sample{}, 0, err
	}
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		return sample{}, 0, err
	}
	msgs := make([]inbox.Message, calls*bs)
	for i := range msgs {
		msgs[i] = message(fmt.Sprintf("pginbox-%d-%07d", round, i), i)
	}
	var accepted atomic.Int64
	got := load(ctx, s.prog, label, calls, workers, bs, func(ctx context.Context, i int) error {
		items, err := client.AcceptBatch(ctx, msgs[i*bs:(i+1)*bs])
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.Outcome != inbox.Accepted {
				return fmt.Errorf("item %s: %s %v", it.ID, it.Outcome, it.Err)
			}
		}
		accepted.Add(int64(len(items)))
		return nil
	})
	return got, int(accepted.Load()), nil
}

// rawBatchArgs are one raw batch call's arrays, built before the clock starts.
type rawBatchArgs struct {
	ids, kinds, scopes, sources, consumers, messageIDs, eventTypes, payloads, metadata []string
	versions                                                                           []int32
	fingerprints                                                                       [][]byte
}

func (s *suite) rawBatch(ctx context.Context, label string, round, calls, bs, workers int) (sample, int, error) {
	pool, err := newPool(ctx, s.base, workers)
	if err != nil {
		return sample{}, 0, err
	}
	defer pool.Close()
	args := make([]rawBatchArgs, calls)
	for c := range args {
		a := &args[c]
		for j := range bs {
			i := c*bs + j
			p := payloadFor(i)
			fp := inbox.Fingerprint(benchEventType, 1, []byte(p))
			a.ids = append(a.ids, uuidText(newID()))
			a.kinds = append(a.kinds, "tenant")
			a.scopes = append(a.scopes, benchTenant)
			a.sources = append(a.sources, benchSource)
			a.consumers = append(a.consumers, benchConsumer)
			a.messageIDs = append(a.messageIDs, fmt.Sprintf("raw-%d-%07d", round, i))
			a.eventTypes = append(a.eventTypes, benchEventType)
			a.versions = append(a.versions, 1)
			a.fingerprints = append(a.fingerprints, fp[:])
			a.payloads = append(a.payloads, p)
			a.metadata = append(a.metadata, "{}")
		}
	}
	var accepted atomic.Int64
	got := load(ctx, s.prog, label, calls, workers, bs, func(ctx context.Context, i int) error {
		a := &args[i]
		rows, err := pool.Query(ctx, rawBatchSQL, a.ids, a.kinds, a.scopes, a.sources, a.consumers,
			a.messageIDs, a.eventTypes, a.versions, a.fingerprints, a.payloads, a.metadata, int32(10))
		if err != nil {
			return err
		}
		n := 0
		var id [16]byte
		for rows.Next() {
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		accepted.Add(int64(n))
		return nil
	})
	return got, int(accepted.Load()), nil
}
