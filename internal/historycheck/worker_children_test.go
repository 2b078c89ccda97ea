//go:build unix

package historycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/childtest"
)

// TestWorkerHistoryKilledWorkers is TestWorkerHistory with its workers in
// processes of their own, one per worker, each killed with SIGKILL about
// once a second at a random moment and started again: a call in flight then
// has no outcome ("unknown"), and what it committed must still be one of the
// model's steps.
func TestWorkerHistoryKilledWorkers(t *testing.T) {
	pool, direct, proxy := proxiedPools(t)
	var kills atomic.Int64
	h := checkWorkerHistory(t, pool, direct, proxy, nil, func(h *workerHistory) {
		h.workerChildren = func(runCtx context.Context, workers int, seed uint64, record func(int, wInput, int64, wOutput, int64)) {
			var wg sync.WaitGroup
			for c := range workers {
				wg.Go(func() { kills.Add(h.runChildWorker(t, runCtx, c, seed, record)) })
			}
			wg.Wait()
		}
	})
	t.Logf("%d worker processes killed", kills.Load())
	if kills.Load() == 0 || h.kills.Load() == 0 || h.cuts.Load() == 0 {
		t.Errorf("%d worker processes killed, %d sessions killed, %d connection cuts: the run did not check every fault",
			kills.Load(), h.kills.Load(), h.cuts.Load())
	}
}

// childCall is a worker child's marker line: a call made, or its outcome.
type childCall struct {
	Seq     int64
	Ret     bool
	In      wInput
	Call    int64 // nanoseconds since the history's start
	Out     wOutput
	Return  int64
	Claimed string // the receipt a claim took
}

// runChildWorker runs history worker c in child processes until runCtx
// ends: it kills the running child with SIGKILL at random moments (about one
// a second) and starts another. Every call a child reported is recorded;
// one without an outcome is "unknown". It returns the kills.
func (h *workerHistory) runChildWorker(t *testing.T, runCtx context.Context, c int, seed uint64, record func(int, wInput, int64, wOutput, int64)) int64 {
	ids := make([]string, len(h.ids))
	for i := range ids {
		if id, ok := h.id(i); ok {
			ids[i] = id.String()
		}
	}
	var kills int64
	for generation := uint64(0); runCtx.Err() == nil; generation++ {
		child := childtest.Start(t, "TestWorkerHistoryChild",
			"HISTORY_CHILD=1",
			"HISTORY_DSN="+h.direct.Config().ConnString(),
			fmt.Sprintf("HISTORY_PROXY_PORT=%d", h.proxy.Port()),
			"HISTORY_CONSUMERS="+strings.Join(h.consumers, ","),
			"HISTORY_IDS="+strings.Join(ids, ","),
			fmt.Sprintf("HISTORY_CLIENT=%d", c),
			fmt.Sprintf("HISTORY_SEED=%d", seed+generation*1_000_003),
			fmt.Sprintf("HISTORY_START=%d", h.start.UnixNano()),
		)
		pending := map[int64]childCall{}
		read := func() {
			for _, m := range child.PendingMarkers() {
				var cc childCall
				if err := json.Unmarshal([]byte(m), &cc); err != nil {
					t.Errorf("worker child %d: marker %q: %v", c, m, err)
					continue
				}
				if !cc.Ret {
					pending[cc.Seq] = cc
					continue
				}
				delete(pending, cc.Seq)
				if cc.Out.Result == "dropped" {
					continue // it never reached the server
				}
				if cc.Claimed != "" {
					if id, err := inboxtype.Parse(cc.Claimed); err == nil {
						h.learn(id, cc.In.Receipt)
					}
				}
				record(c, cc.In, cc.Call, cc.Out, cc.Return)
			}
		}
		killed := watchChild(t, runCtx, child, time.Duration(200+rand.IntN(1600))*time.Millisecond, read)
		if killed {
			kills++
		}
		if err := child.Err(); !killed && runCtx.Err() == nil {
			t.Errorf("worker child %d ended by itself (%v):\n%s", c, err, child.Output())
			return kills
		}
		for _, cc := range pending {
			record(c, cc.In, cc.Call, wOutput{Result: "unknown"}, h.now())
		}
	}
	return kills
}

// TestWorkerHistoryChild is a worker of TestWorkerHistoryKilledWorkers, in
// a process of its own: it runs workerLoop and reports each call before it
// is made and its outcome after, as marker lines.
func TestWorkerHistoryChild(t *testing.T) {
	if os.Getenv("HISTORY_CHILD") == "" {
		t.Skip("only runs as a child process of TestWorkerHistoryKilledWorkers")
	}
	childtest.ExitWithParent()
	ctx := context.Background()
	pool := childPool(t, os.Getenv("HISTORY_DSN"), os.Getenv("HISTORY_PROXY_PORT"), 2)
	defer pool.Close()
	start, _ := strconv.ParseInt(os.Getenv("HISTORY_START"), 10, 64)
	c, _ := strconv.Atoi(os.Getenv("HISTORY_CLIENT"))
	seed, _ := strconv.ParseUint(os.Getenv("HISTORY_SEED"), 10, 64)
	h := &workerHistory{pool: pool, q: db.New(pool), consumers: strings.Split(os.Getenv("HISTORY_CONSUMERS"), ","),
		start: time.Unix(0, start), index: map[inbox.ID]int{}}
	h.ids = make([]inbox.ID, len(h.consumers))
	for i, s := range strings.Split(os.Getenv("HISTORY_IDS"), ",") {
		if id, err := inboxtype.Parse(s); err == nil && i < len(h.ids) {
			h.ids[i] = id
		}
	}
	h.workerLoop(ctx, ctx, c, seed, &childCalls{h: h})
}

// watchChild reads child's markers every 5 ms until it exits, ctx ends or
// life runs out, killing it with SIGKILL in the two last cases, then reads
// once more. It reports whether life ran out (a kill the test chose).
func watchChild(t *testing.T, ctx context.Context, child *childtest.Child, life time.Duration, read func()) (killed bool) {
	end := time.After(life)
	defer read()
	for {
		select {
		case <-child.Exited():
			return false
		case <-ctx.Done():
			child.Kill(t)
			return false
		case <-end:
			child.Kill(t)
			return true
		case <-time.After(5 * time.Millisecond):
			read()
		}
	}
}

// childPool is a child process's pool of maxConns connections to dsn
// through the fault proxy on port, so the fault injector kills and cuts
// its sessions too.
func childPool(t *testing.T, dsn, port string, maxConns int32) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	throughProxy(cfg, uint16(p))
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// childCalls reports a worker child's calls as marker lines.
type childCalls struct {
	h   *workerHistory
	seq int64
}

func (r *childCalls) call(in wInput) int64 {
	r.seq++
	at := r.h.now()
	r.mark(childCall{Seq: r.seq, In: in, Call: at})
	return at
}

func (r *childCalls) ret(in wInput, call int64, out wOutput, claimed inbox.ID) {
	cc := childCall{Seq: r.seq, Ret: true, In: in, Call: call, Out: out, Return: r.h.now()}
	if claimed != (inbox.ID{}) {
		cc.Claimed = claimed.String()
		r.h.learn(claimed, in.Receipt)
	}
	r.mark(cc)
}

// drop reports a call that never reached the server as done with no
// effect: the parent forgets it (a read-only outcome nothing checks).
func (r *childCalls) drop(in wInput, call int64) {
	r.mark(childCall{Seq: r.seq, Ret: true, In: in, Call: call, Out: wOutput{Result: "dropped"}, Return: r.h.now()})
}

func (r *childCalls) id(i int) (inbox.ID, bool) { return r.h.id(i) }

func (r *childCalls) mark(cc childCall) {
	b, err := json.Marshal(cc)
	if err != nil {
		panic(err)
	}
	childtest.Mark("%s", b)
}
