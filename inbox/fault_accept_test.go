package inbox_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// delivery is one Accept call of the burst and what it returned.
type delivery struct {
	i   int // message index
	res inbox.AcceptResult
	err error
}

// TestFaultConnectionCutDuringAcceptBurst cuts every proxied connection again
// and again (and refuses new ones for a while) during a burst of concurrent
// Accepts, each message delivered twice. No call may acknowledge what is not
// stored; every failure must say Retry; redelivering the failures once traffic
// passes must reconcile to exactly one receipt per identity.
func TestFaultConnectionCutDuringAcceptBurst(t *testing.T) {
	t.Parallel()
	for name, groupCommit := range map[string]bool{"per call": false, "group commit": true} {
		t.Run(name, func(t *testing.T) {
			const (
				messages = 400
				copies   = 2
				callers  = 32
				cuts     = 12
			)
			p, dsn, direct := faultDB(t)
			pool := proxyPool(t, p, dsn, func(c *pgxpool.Config) { c.MaxConns = 8 })
			c := newClient(t, pool, inbox.Config{GroupCommit: groupCommit})

			order := make([]int, 0, messages*copies)
			for range copies {
				for i := range messages {
					order = append(order, i)
				}
			}
			rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })

			// The burst: every delivery once, concurrently.
			work := make(chan int)
			results := make(chan delivery, len(order))
			started := make(chan struct{}) // closed by the first call
			markStarted := sync.OnceFunc(func() { close(started) })
			var callersWG sync.WaitGroup
			for range callers {
				callersWG.Go(func() {
					for i := range work {
						markStarted()
						ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
						res, err := c.Accept(ctx, faultMsg(i))
						cancel()
						results <- delivery{i: i, res: res, err: err}
					}
				})
			}
			burstDone := make(chan struct{})
			cutterDone := make(chan int)
			go func() {
				n := 0
				<-started
				for n < cuts {
					select {
					case <-burstDone:
						cutterDone <- n
						return
					case <-time.After(10 * time.Millisecond):
					}
					n++
					if n == cuts/2 {
						// Down for a while: new connections fail too.
						p.Refuse()
						p.Cut()
						// The outage's length is the fault: calls meet it as they come.
						time.Sleep(30 * time.Millisecond)
						p.Resume()
						continue
					}
					p.Cut()
				}
				cutterDone <- n
			}()
			start := time.Now()
			for _, i := range order {
				work <- i
			}
			close(work)
			callersWG.Wait()
			close(burstDone)
			cutsDone := <-cutterDone
			close(results)
			burst := time.Since(start)

			// Phase 1: what the burst returned.
			var failed []delivery
			acked := map[int][]inbox.AcceptResult{}
			uncertain := 0
			for d := range results {
				if d.err != nil {
					if a := inbox.ActionFor(d.err); a != inbox.ActionRetry {
						t.Errorf("message %d: action %v for %v, want retry", d.i, a, d.err)
					}
					if errors.Is(d.err, inbox.ErrCommitUncertain) {
						uncertain++
					}
					failed = append(failed, d)
					continue
				}
				if d.res.Outcome != inbox.Accepted && d.res.Outcome != inbox.Duplicate {
					t.Errorf("message %d: outcome %v without an error", d.i, d.res.Outcome)
				}
				acked[d.i] = append(acked[d.i], d.res)
			}
			t.Logf("burst of %d deliveries in %v: %d cuts closed %d connections; %d failed (%d commit uncertain)",
				len(order), burst.Round(time.Millisecond), cutsDone, p.CutCount(), len(failed), uncertain)
			if p.CutCount() == 0 || len(failed) == 0 {
				t.Fatalf("the cuts hit no call in flight (%d connections cut, %d failures): the test proved nothing", p.CutCount(), len(failed))
			}
			// No wrong ack: every acknowledged call's receipt is stored, under
			// the ID the call reported. Nothing deletes receipts, so checking
			// after the burst is as strong as checking at each ack.
			stored := receiptIDs(t, direct)
			checkAcks := func(phase string) {
				t.Helper()
				for i, rs := range acked {
					id, ok := stored[faultMsgID(i)]
					if !ok {
						t.Errorf("%s: message %d was acknowledged (%v) but has no receipt", phase, i, rs[0].Outcome)
						continue
					}
					accepted := 0
					for _, r := range rs {
						if r.ID != id {
							t.Errorf("%s: message %d acknowledged as receipt %s, stored as %s", phase, i, r.ID, id)
						}
						if r.Outcome == inbox.Accepted {
							accepted++
						}
					}
					if accepted > 1 {
						t.Errorf("%s: message %d was Accepted %d times", phase, i, accepted)
					}
				}
			}
			checkAcks("after the burst")

			// Phase 2: traffic passes again; the transport redelivers every
			// delivery it did not ack.
			p.Resume()
			maxTries := 0
			for _, d := range failed {
				res, tries := redeliver(t, c, faultMsg(d.i), 5)
				maxTries = max(maxTries, tries)
				if res.Outcome != inbox.Accepted && res.Outcome != inbox.Duplicate {
					t.Errorf("redelivery of message %d: outcome %v", d.i, res.Outcome)
				}
				acked[d.i] = append(acked[d.i], res)
			}
			lostCommits := 0 // committed although the caller was never told
			for _, rs := range acked {
				if !slicesContainsOutcome(rs, inbox.Accepted) {
					lostCommits++
				}
			}
			t.Logf("redelivered %d (at most %d tries each); %d identities were stored by a call that got an error",
				len(failed), maxTries, lostCommits)

			stored = receiptIDs(t, direct)
			if len(stored) != messages || len(acked) != messages {
				t.Fatalf("%d receipts and %d acknowledged identities, want %d", len(stored), len(acked), messages)
			}
			checkAcks("after redelivery")
			if n := countRows(t, direct, "true"); n != messages {
				t.Fatalf("%d receipts, want %d", n, messages)
			}
		})
	}
}

func slicesContainsOutcome(rs []inbox.AcceptResult, o inbox.Outcome) bool {
	for _, r := range rs {
		if r.Outcome == o {
			return true
		}
	}
	return false
}

// TestFaultBlackholeAccept partitions the network (the proxy forwards nothing
// but keeps every socket open) and checks that an Accept with a deadline comes
// back by that deadline with a Retry, and that the redelivery after the
// partition reconciles with whatever the server ended up doing.
func TestFaultBlackholeAccept(t *testing.T) {
	t.Parallel()
	const (
		deadline = time.Second
		slack    = 2 * time.Second // -race, a loaded machine
	)
	type setup struct {
		warm   bool // an idle connection with the accept statement prepared
		cut    bool // the connection dies in the partition (held data lost)
		noSend bool // the call cannot have been sent: no connection
	}
	for name, s := range map[string]setup{
		// The statement is sent into the partition and held; when the partition
		// heals it reaches the server, which may commit it after the caller
		// gave up: the uncertain case.
		"partition heals": {warm: true},
		// The statement is sent into the partition, which then resets the
		// connection: it never reaches the server.
		"connection dies in the partition": {warm: true, cut: true},
		// No idle connection: connecting hangs, nothing is sent.
		"connect in the partition": {noSend: true},
	} {
		t.Run(name, func(t *testing.T) {
			p, dsn, direct := faultDB(t)
			pool := proxyPool(t, p, dsn, noPing, func(c *pgxpool.Config) { c.MaxConns = 1 })
			c := newClient(t, pool, inbox.Config{})
			msg := orderMsg("evt-blackhole", map[string]string{"orderId": "o-1"})
			if s.warm {
				if _, err := c.Accept(context.Background(), orderMsg("evt-warm", map[string]string{"orderId": "o-0"})); err != nil {
					t.Fatal(err)
				}
			}

			p.Blackhole()
			defer p.Resume()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			start := time.Now()
			_, err := c.Accept(ctx, msg)
			elapsed := time.Since(start)
			cancel()
			t.Logf("Accept returned after %v: %v", elapsed.Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("Accept succeeded through a blackhole")
			}
			if elapsed < deadline-50*time.Millisecond || elapsed > deadline+slack {
				t.Errorf("Accept returned after %v, want about %v", elapsed, deadline)
			}
			if a := inbox.ActionFor(err); a != inbox.ActionRetry {
				t.Errorf("action %v, want retry", a)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v does not say the deadline passed", err)
			}
			if got := errors.Is(err, inbox.ErrCommitUncertain); got == s.noSend {
				t.Errorf("ErrCommitUncertain = %v, want %v: %v", got, !s.noSend, err)
			}
			if s.warm && p.Held() == 0 {
				t.Error("the proxy holds nothing: the statement was not sent into the partition")
			}

			if s.cut {
				p.Cut()
			}
			p.Resume()
			// Let the server finish whatever reached it (pgx also sent a cancel
			// request when it gave up, which the partition held as well).
			waitSettled(t, p, direct, proxiedApp, !s.noSend)
			id, committed := receiptID(t, direct, msg.MessageID)
			if committed && (s.cut || s.noSend) {
				t.Fatal("a statement that never reached the server committed")
			}
			t.Logf("the held accept committed after the caller gave up: %v", committed)

			res, tries := redeliver(t, c, msg, 3)
			want := inbox.Accepted
			if committed {
				want = inbox.Duplicate
			}
			if res.Outcome != want {
				t.Errorf("redelivery (%d tries): %v, want %v", tries, res.Outcome, want)
			}
			if committed && res.ID != id {
				t.Errorf("redelivery returned receipt %s, stored is %s", res.ID, id)
			}
			if got, ok := receiptID(t, direct, msg.MessageID); !ok || got != res.ID {
				t.Errorf("stored receipt %s (exists %v), redelivery said %s", got, ok, res.ID)
			}
		})
	}
}
