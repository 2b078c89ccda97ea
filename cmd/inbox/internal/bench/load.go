package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Measure is one side (pginbox or raw) of a scenario over all its rounds.
type Measure struct {
	Description string  `json:"description"`   // what was measured, in words
	Calls       int     `json:"calls"`         // in messages
	Seconds     float64 `json:"seconds"`       // wall time over all rounds
	CallsPerSec float64 `json:"calls_per_sec"` // Calls / Seconds
	P50Ms       float64 `json:"p50_ms"`        // latency percentiles per call (a batch call is one), in ms
	P95Ms       float64 `json:"p95_ms"`        // 95th percentile
	P99Ms       float64 `json:"p99_ms"`        // 99th percentile
	Errors      int     `json:"errors"`        // calls that returned an error
}

// sample accumulates phases of one side.
type sample struct {
	calls     int // in messages
	elapsed   time.Duration
	latencies []time.Duration // per call (a batch call is one latency)
	errors    int
	firstErr  error
}

func (s *sample) add(o sample) {
	s.calls += o.calls
	s.elapsed += o.elapsed
	s.latencies = append(s.latencies, o.latencies...)
	s.errors += o.errors
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
}

func (s *sample) measure(desc string) Measure {
	m := Measure{Description: desc, Calls: s.calls, Seconds: s.elapsed.Seconds(), Errors: s.errors}
	if s.elapsed > 0 {
		m.CallsPerSec = float64(s.calls) / s.elapsed.Seconds()
	}
	if len(s.latencies) > 0 {
		slices.Sort(s.latencies)
		m.P50Ms = ms(percentile(s.latencies, 50))
		m.P95Ms = ms(percentile(s.latencies, 95))
		m.P99Ms = ms(percentile(s.latencies, 99))
	}
	return m
}

// percentile of sorted d, nearest-rank.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*1000) / 1000
}

// load calls fn(i) for i in [0, calls) from workers goroutines and times every
// call. perCall is how many messages one call carries (a batch size).
func load(ctx context.Context, prog *progress, label string, calls, workers, perCall int, fn func(ctx context.Context, i int) error) sample {
	var (
		next, done atomic.Int64
		errs       atomic.Int64
		mu         sync.Mutex
		firstErr   error
		lat        = make([][]time.Duration, workers)
		wg         sync.WaitGroup
	)
	stop := prog.phase(label, calls*perCall, func() int { return int(done.Load()) * perCall })
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, calls/workers+1)
			for {
				i := int(next.Add(1) - 1)
				if i >= calls || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				err := fn(ctx, i)
				mine = append(mine, time.Since(t0))
				done.Add(1)
				if err != nil {
					errs.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("call %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
			lat[w] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	s := sample{calls: int(done.Load()) * perCall, elapsed: elapsed, errors: int(errs.Load()), firstErr: firstErr}
	for _, l := range lat {
		s.latencies = append(s.latencies, l...)
	}
	return s
}

// progress shows what runs. On a terminal it rewrites one status line a few
// times a second; elsewhere it writes one line per finished phase.
type progress struct {
	w   io.Writer
	tty bool
	mu  sync.Mutex
}

func (p *progress) note(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// phase starts showing a phase of total units; the returned func ends it.
func (p *progress) phase(label string, total int, doneUnits func() int) (stop func()) {
	if p == nil || p.w == nil {
		return func() {}
	}
	start := time.Now()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	if p.tty {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-quit:
					return
				case <-t.C:
				}
				n := doneUnits()
				p.mu.Lock()
				fmt.Fprintf(p.w, "\r\033[K  %-44s %s/%s  %4.1fs", label, thousands(n), thousands(total), time.Since(start).Seconds())
				p.mu.Unlock()
			}
		}()
	}
	return func() {
		close(quit)
		wg.Wait()
		el := time.Since(start)
		n := doneUnits()
		rate := 0.0
		if el > 0 {
			rate = float64(n) / el.Seconds()
		}
		p.note("  %-44s %s in %.2fs (%s/s)", label, thousands(n), el.Seconds(), thousands(int(math.Round(rate))))
	}
}

// thousands formats n with comma separators: 12,345.
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
