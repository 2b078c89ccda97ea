package bench

import (
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// HookedTarget is the goal for pginbox with Hooks installed against plain
// pginbox in the same run: instrumentation may cost at most 5%.
const HookedTarget = 0.95

// Hooks instrument pginbox for a measured side of its own. With
// Options.Hooks set, accept-fresh, accept-retained, accept-dup90,
// accept-group and the drain scenarios also run "hooked" phases,
// alternating with the others, and
// Result.Hooked reports them against plain pginbox. The OpenTelemetry
// integration lives in a nested module, so its bench (cmd/inbox/otelbench)
// passes it in through these hooks; the root module stays free of it.
type Hooks struct {
	// Name labels the hooked side in the report, e.g. "otel".
	Name string
	// Client changes the inbox.Config of the hooked accept phases (adds
	// AcceptMiddleware).
	Client func(*inbox.Config)
	// Worker changes the inbox.WorkerConfig of the hooked drain phases (adds
	// HandlerMiddleware).
	Worker func(*inbox.WorkerConfig)
	// Observe is called with each hooked worker before it starts; the
	// returned function after it stopped (ObserveWorker and Close).
	Observe func(*inbox.Worker) (stop func())
}

// sideHooked names the hooked side of a scenario.
const sideHooked = "hooked"

// sides returns the sides a scenario alternates: pginbox, the raw ceiling,
// and the hooked side when hooks are set.
func (s *suite) sides(base ...string) []string {
	if s.o.Hooks != nil {
		return append(base, sideHooked)
	}
	return base
}

// hooksFor returns the hooks of a side: nil but for the hooked side.
func (s *suite) hooksFor(side string) *Hooks {
	if side == sideHooked {
		return s.o.Hooks
	}
	return nil
}

// finishHooked reports the hooked side against plain pginbox.
func (s *suite) finishHooked(r *Result, hooked sample) {
	if s.o.Hooks == nil {
		return
	}
	m := hooked.measure(fmt.Sprintf("pginbox with the %s hooks installed, same callers", s.o.Hooks.Name))
	m.CallsPerSec, m.Seconds = round2(m.CallsPerSec), round2(m.Seconds)
	r.Hooked = &m
	if r.CallsPerSec > 0 {
		r.HookedRatio = round2(m.CallsPerSec / r.CallsPerSec)
	}
	r.HookedTarget = fmt.Sprintf(">= %.2f x pginbox without hooks", HookedTarget)
	r.HookedMeetsTarget = r.HookedRatio >= HookedTarget
	if hooked.firstErr != nil {
		r.failf("%s: %d errors, first: %v", sideHooked, hooked.errors, hooked.firstErr)
	}
}

func (h *Hooks) client(cfg inbox.Config) inbox.Config {
	if h != nil && h.Client != nil {
		h.Client(&cfg)
	}
	return cfg
}

func (h *Hooks) worker(cfg inbox.WorkerConfig) inbox.WorkerConfig {
	if h != nil && h.Worker != nil {
		h.Worker(&cfg)
	}
	return cfg
}

func (h *Hooks) observe(w *inbox.Worker) (stop func()) {
	if h == nil || h.Observe == nil {
		return func() {}
	}
	return h.Observe(w)
}
