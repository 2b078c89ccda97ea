package inbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pginbox/pginbox/db"
)

// claimed is a receipt as a claim returned it: everything its handler needs.
type claimed struct {
	ID            ID
	Token         ID // fences every later update of this claim
	Identity      Identity
	EventType     string
	SchemaVersion int
	Payload       *string // nil when purged; loaded after the claim
	Metadata      string  // loaded after the claim
	Attempt       int
	MaxAttempts   int
	CreatedAt     time.Time
	// node is the Citus worker node the claim ran on (WorkerConfig.Nodes),
	// where the receipt's statements go; -1 without Nodes.
	node int
}

func claimedFromRow(r db.ReceiptClaimScopeRow) claimed {
	return claimed{
		ID:            r.ID,
		Token:         r.ClaimToken,
		Identity:      identityOf(r.ScopeKind, r.ScopeID, r.Source, r.Consumer, r.MessageID),
		EventType:     r.EventType,
		SchemaVersion: int(r.SchemaVersion),
		Attempt:       int(r.Attempts),
		MaxAttempts:   int(r.MaxAttempts),
		CreatedAt:     r.CreatedAt,
		node:          -1,
	}
}

// lease is a claimed receipt this worker holds until it reaches an outcome.
type lease struct {
	r claimed
	// ctx is cancelled with ErrLeaseLost when a heartbeat finds the claim gone.
	ctx  context.Context
	lose context.CancelCauseFunc
}

// leaseSet is every lease a worker holds: what the heartbeat extends.
type leaseSet struct {
	mu   sync.Mutex
	held map[ID]*lease
}

func newLeaseSet() *leaseSet { return &leaseSet{held: map[ID]*lease{}} }

// add starts holding the receipts of a claim.
func (s *leaseSet) add(rows []claimed) []*lease {
	out := make([]*lease, len(rows))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range rows {
		ctx, lose := context.WithCancelCause(context.Background())
		out[i] = &lease{r: r, ctx: ctx, lose: lose}
		s.held[r.ID] = out[i]
	}
	return out
}

// drop forgets l once its receipt reached an outcome (or was handed back).
func (s *leaseSet) drop(l *lease) {
	s.mu.Lock()
	// The same receipt may have been recovered and claimed again meanwhile:
	// forget only this lease, never its successor.
	if s.held[l.r.ID] == l {
		delete(s.held, l.r.ID)
	}
	s.mu.Unlock()
	l.lose(nil)
}

// count returns how many receipts are held.
func (s *leaseSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// snapshot returns the held leases.
func (s *leaseSet) snapshot() []*lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*lease, 0, len(s.held))
	for _, l := range s.held {
		out = append(out, l)
	}
	return out
}

// startHeartbeat extends every held lease each HeartbeatInterval, in one
// statement, and cancels the leases found lost. It returns a function that stops
// it and waits.
func (w *Worker) startHeartbeat() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(w.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := w.extendLeases(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("pginbox worker: heartbeat failed, will retry", "error", err)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (w *Worker) extendLeases(ctx context.Context) error {
	if w.hooks.noHeartbeat {
		return nil
	}
	held := w.leases.snapshot()
	if len(held) == 0 {
		return nil
	}
	// One statement per scope held (on Citus, each runs on its scope's
	// node), in the order the scopes were first met.
	byID := make(map[ID]*lease, len(held))
	type scopeLeases struct {
		first       claimed // where the scope's statement runs
		ids, tokens []string
	}
	type key struct {
		node  int
		scope string
	}
	var order []key
	byScope := map[key]*scopeLeases{}
	for _, l := range held {
		byID[l.r.ID] = l
		k := key{l.r.node, l.r.Identity.Scope.ID}
		s := byScope[k]
		if s == nil {
			s = &scopeLeases{first: l.r}
			byScope[k] = s
			order = append(order, k)
		}
		s.ids = append(s.ids, l.r.ID.UUIDString())
		s.tokens = append(s.tokens, l.r.Token.UUIDString())
	}
	// A heartbeat stuck on a dead connection must not outlive its interval.
	ctx, cancel := context.WithTimeout(ctx, w.cfg.HeartbeatInterval)
	defer cancel()
	// A scope whose node is down fails alone: the others are extended.
	var errs []error
	for _, k := range order {
		s := byScope[k]
		lost, err := db.New(w.on(w.sys, s.first)).ReceiptHeartbeat(ctx, db.ReceiptHeartbeatParams{
			Ids: s.ids, Tokens: s.tokens, LeaseMs: w.cfg.Lease.Milliseconds(), ScopeID: k.scope,
		})
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		for _, id := range lost {
			if l := byID[id]; l != nil {
				l.lose(ErrLeaseLost)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return dbError("heartbeat", err)
	}
	return nil
}
