package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox"
)

// acceptSpec describes an accept scenario: calls per phase from workers
// callers, after seeding retained COMPLETED receipts.
type acceptSpec struct {
	name, desc string
	workers    int
	calls      int
	retained   int
	// dupEvery > 0 makes every call but each dupEvery-th a redelivery of a
	// retained receipt (10: 90% duplicates).
	dupEvery    int
	groupCommit bool
	rawNotify   bool // also measure the insert with an inline pg_notify
	target      float64
	targetText  string
}

func (s *suite) acceptFresh(ctx context.Context) *Result {
	return s.acceptScenario(ctx, acceptSpec{
		name:       ScenarioAcceptFresh,
		desc:       "Accept of unique events into an empty table, 1 call = 1 transaction",
		workers:    s.o.Concurrency,
		calls:      s.o.Calls,
		rawNotify:  true,
		target:     0.9,
		targetText: ">= 0.90 x raw single-statement ceiling",
	})
}

func (s *suite) acceptRetained(ctx context.Context) *Result {
	return s.acceptScenario(ctx, acceptSpec{
		name:       ScenarioAcceptRetained,
		desc:       fmt.Sprintf("Accept of unique events with %s retained receipts", thousands(s.o.Retained)),
		workers:    s.o.Concurrency,
		calls:      s.o.Calls,
		retained:   s.o.Retained,
		target:     0.9,
		targetText: ">= 0.90 x raw single-statement ceiling",
	})
}

func (s *suite) acceptDup90(ctx context.Context) *Result {
	return s.acceptScenario(ctx, acceptSpec{
		name:       ScenarioAcceptDup90,
		desc:       fmt.Sprintf("Accept with %s retained receipts, 90%% of calls redeliver one of them", thousands(s.o.Retained)),
		workers:    s.o.Concurrency,
		calls:      s.o.Calls,
		retained:   s.o.Retained,
		dupEvery:   10,
		target:     0.9,
		targetText: ">= 0.90 x raw ceiling (same insert + read of the existing row)",
	})
}

func (s *suite) acceptGroup(ctx context.Context) *Result {
	r := s.acceptScenario(ctx, acceptSpec{
		name:        ScenarioAcceptGroup,
		desc:        fmt.Sprintf("Accept from %d concurrent callers with Config.GroupCommit", s.o.GroupCallers),
		workers:     s.o.GroupCallers,
		calls:       s.o.GroupCalls,
		groupCommit: true,
		rawNotify:   true,
		target:      5,
		targetText:  ">= 5x raw single-statement ceiling (same callers), p95 <= 25 ms",
	})
	r.MeetsTarget = r.MeetsTarget && r.P95Ms <= 25
	if s.freshRaw != nil && s.freshRaw.CallsPerSec > 0 {
		r.Extra = map[string]float64{
			"ratio_vs_fresh_raw": round2(r.CallsPerSec / s.freshRaw.CallsPerSec),
		}
	}
	return r
}

// outcomeCounts tallies one phase's results.
type outcomeCounts struct {
	accepted, duplicates atomic.Int64
}

// expectedFresh is how many of calls are new identities.
func (sp acceptSpec) expectedFresh(calls int) int {
	if sp.dupEvery <= 0 {
		return calls
	}
	return (calls + sp.dupEvery - 1) / sp.dupEvery
}

// plan says what call i of a phase delivers.
func (sp acceptSpec) plan(side string, round, i int) (messageID string, payloadIndex int, fresh bool) {
	if sp.dupEvery > 0 && i%sp.dupEvery != 0 {
		k := (i * 7919) % sp.retained
		return seedID("retained", k), k, false
	}
	return fmt.Sprintf("%s-%d-%07d", side, round, i), sp.retained + i, true
}

func (s *suite) acceptScenario(ctx context.Context, sp acceptSpec) *Result {
	r := &Result{
		Scenario: sp.name, Description: sp.desc, Concurrency: sp.workers,
		Rounds: s.o.Rounds, Target: sp.targetText, OK: true, Failures: []string{},
	}
	sides := s.sides("pginbox", "raw")
	if sp.rawNotify {
		sides = append(sides, "raw-notify")
	}
	sides = s.withRLS(sides)
	var pg, raw, notify, hooked, rls sample
	for round := range s.o.Rounds {
		order := sides
		if round%2 == 1 { // alternate who goes first
			order = []string{sides[len(sides)-1]}
			order = append(order, sides[:len(sides)-1]...)
		}
		for _, side := range order {
			if err := s.reset(ctx, sp.retained); err != nil {
				r.failf("%v", err)
				return r
			}
			var got sample
			var oc outcomeCounts
			var err error
			label := fmt.Sprintf("%s %s round %d/%d", sp.name, side, round+1, s.o.Rounds)
			switch side {
			case "pginbox", sideHooked, sideRLS:
				profile := ""
				if side == "pginbox" {
					profile = fmt.Sprintf("%s-round%d", sp.name, round+1)
				}
				got, err = s.pginboxAccept(ctx, sp, label, side, round, &oc, profile)
			case "raw":
				got, err = s.rawAccept(ctx, sp, label, round, rawAcceptSQL, &oc, fmt.Sprintf("%s-raw-round%d", sp.name, round+1))
			case "raw-notify":
				got, err = s.rawAccept(ctx, sp, label, round, rawNotifyAcceptSQL, &oc, "")
			}
			if err != nil {
				r.failf("%s: %v", side, err)
				return r
			}
			s.checkAccept(ctx, r, sp, side, got, &oc)
			switch side {
			case "pginbox":
				pg.add(got)
				r.Counts.Accepted += int(oc.accepted.Load())
				r.Counts.Duplicates += int(oc.duplicates.Load())
			case "raw":
				raw.add(got)
				r.Counts.RawAccepted += int(oc.accepted.Load())
				r.Counts.RawDuplicates += int(oc.duplicates.Load())
			case "raw-notify":
				notify.add(got)
			case sideHooked:
				hooked.add(got)
			case sideRLS:
				rls.add(got)
			}
		}
	}
	s.finish(r, pg, raw, "same statements from a plain pgx loop, same callers")
	s.finishHooked(r, hooked)
	s.finishRLS(r, rls)
	if sp.rawNotify {
		m := notify.measure("the insert with pg_notify in every statement, plain pgx loop, same callers")
		m.CallsPerSec, m.Seconds = round2(m.CallsPerSec), round2(m.Seconds)
		r.RawNotify = &m
	}
	if sp.name == ScenarioAcceptFresh {
		s.freshRaw = &r.Raw
	}
	r.MeetsTarget = r.Ratio >= sp.target
	r.Verified = fmt.Sprintf("%s calls: %s accepted, %s duplicates, %d errors; raw: %s inserted, %s duplicates",
		thousands(pg.calls), thousands(r.Counts.Accepted), thousands(r.Counts.Duplicates), r.Errors,
		thousands(r.Counts.RawAccepted), thousands(r.Counts.RawDuplicates))
	return r
}

// finish fills the pginbox and raw figures from the samples.
func (s *suite) finish(r *Result, pg, raw sample, rawDesc string) {
	m := pg.measure("")
	r.Calls, r.Seconds, r.CallsPerSec = m.Calls, round2(m.Seconds), round2(m.CallsPerSec)
	r.P50Ms, r.P95Ms, r.P99Ms, r.Errors = m.P50Ms, m.P95Ms, m.P99Ms, m.Errors
	r.Raw = raw.measure(rawDesc)
	r.Raw.CallsPerSec, r.Raw.Seconds = round2(r.Raw.CallsPerSec), round2(r.Raw.Seconds)
	if r.Raw.CallsPerSec > 0 {
		r.Ratio = round2(r.CallsPerSec / r.Raw.CallsPerSec)
	}
	if pg.firstErr != nil {
		r.failf("pginbox: %d errors, first: %v", pg.errors, pg.firstErr)
	}
	if raw.firstErr != nil {
		r.failf("raw: %d errors, first: %v", raw.errors, raw.firstErr)
	}
}

// checkAccept verifies one accept phase from its outcomes and the database.
func (s *suite) checkAccept(ctx context.Context, r *Result, sp acceptSpec, side string, got sample, oc *outcomeCounts) {
	wantFresh := sp.expectedFresh(got.calls)
	acc, dup := int(oc.accepted.Load()), int(oc.duplicates.Load())
	if acc != wantFresh || dup != got.calls-wantFresh {
		r.failf("%s: %d calls gave %d accepted and %d duplicates, want %d and %d", side, got.calls, acc, dup, wantFresh, got.calls-wantFresh)
	}
	c, err := s.counts(ctx)
	if err != nil {
		r.failf("%v", err)
		return
	}
	if c.receipts != sp.retained+wantFresh || c.pending != wantFresh {
		r.failf("%s: the database holds %d receipts (%d pending), want %d (%d pending)", side, c.receipts, c.pending, sp.retained+wantFresh, wantFresh)
	}
	if side == "pginbox" {
		r.Counts.ReceiptsInDB = c.receipts
	}
}

// A non-empty profile names the phase's profile (startProfile).
func (s *suite) pginboxAccept(ctx context.Context, sp acceptSpec, label, side string, round int, oc *outcomeCounts, profile string) (sample, error) {
	base := s.base
	if side == sideRLS {
		off, err := s.rlsOn(ctx)
		if err != nil {
			return sample{}, err
		}
		defer off()
		base = s.asRole(rlsAppRole)
	}
	pool, err := newPool(ctx, base, sp.workers)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	cfg := inbox.Config{Logger: discardLogger, GroupCommit: sp.groupCommit}
	if sp.groupCommit {
		cfg.GroupCommitFlushers = s.o.GroupFlushers
	}
	client, err := inbox.NewClient(pool, s.hooksFor(side).client(cfg))
	if err != nil {
		return sample{}, err
	}
	msgs := make([]inbox.Message, sp.calls)
	fresh := make([]bool, sp.calls)
	for i := range msgs {
		id, k, f := sp.plan(side, round, i)
		msgs[i], fresh[i] = message(id, k), f
	}
	stopProfile := s.startProfile(profile)
	got := load(ctx, s.prog, label, sp.calls, sp.workers, 1, func(ctx context.Context, i int) error {
		res, err := client.Accept(ctx, msgs[i])
		if err != nil {
			return err
		}
		if (res.Outcome == inbox.Accepted) != fresh[i] {
			return fmt.Errorf("%s: outcome %s, want the other", msgs[i].MessageID, res.Outcome)
		}
		if res.Outcome == inbox.Accepted {
			oc.accepted.Add(1)
		} else {
			oc.duplicates.Add(1)
		}
		return nil
	})
	stopProfile(got.calls)
	return got, nil
}

// rawArgs is one raw accept call, prepared before the clock starts.
type rawArgs struct {
	id          [16]byte
	messageID   string
	fingerprint []byte
	payload     string
}

func (s *suite) rawAccept(ctx context.Context, sp acceptSpec, label string, round int, insertSQL string, oc *outcomeCounts, profile string) (sample, error) {
	pool, err := newPool(ctx, s.base, sp.workers)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	args := make([]rawArgs, sp.calls)
	for i := range args {
		id, k, _ := sp.plan("raw", round, i)
		p := payloadFor(k)
		fp := inbox.Fingerprint(benchEventType, 1, []byte(p)) // fixture data, not timed
		args[i] = rawArgs{id: newID(), messageID: id, fingerprint: fp[:], payload: p}
	}
	stopProfile := s.startProfile(profile)
	got := load(ctx, s.prog, label, sp.calls, sp.workers, 1, func(ctx context.Context, i int) error {
		a := &args[i]
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		var id [16]byte
		var status string
		var notified bool
		dest := []any{&id, &status}
		if insertSQL == rawNotifyAcceptSQL {
			dest = append(dest, &notified)
		}
		err = conn.QueryRow(ctx, insertSQL, a.id, "tenant", benchTenant, benchSource, benchConsumer, a.messageID,
			benchEventType, int32(1), a.fingerprint, a.payload, "{}", int32(10)).Scan(dest...)
		if err == nil {
			oc.accepted.Add(1)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var fp []byte
		err = conn.QueryRow(ctx, rawByIdentitySQL, "tenant", benchTenant, benchSource, benchConsumer, a.messageID).Scan(&id, &status, &fp)
		if err != nil {
			return err
		}
		if !bytes.Equal(fp, a.fingerprint) {
			return fmt.Errorf("%s: conflict", a.messageID)
		}
		oc.duplicates.Add(1)
		return nil
	})
	stopProfile(got.calls)
	return got, nil
}

func round2(f float64) float64 {
	return float64(int64(f*100+0.5)) / 100
}
