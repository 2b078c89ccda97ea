package inbox

import "sync"

// readyQueue holds claimed receipts until a handler slot takes them, in one
// first-in first-out list per scope. A slot takes up to MessagesPerTx
// receipts of one scope, because a transaction carries one scope: taking
// them in claim order instead would split a slot's batch into a transaction
// per scope whenever tenants interleave (with 16 tenants, about one message
// per transaction). Scopes take turns, so one tenant's share of a claim
// cannot hold the others' receipts back behind it.
type readyQueue struct {
	mu       sync.Mutex
	nonEmpty *sync.Cond
	byScope  map[Scope][]*lease
	turns    []Scope // the scopes with queued receipts, next turn first
	n        int     // queued receipts
	capacity int
	closed   bool
}

func newReadyQueue(capacity int) *readyQueue {
	q := &readyQueue{byScope: make(map[Scope][]*lease), capacity: capacity}
	q.nonEmpty = sync.NewCond(&q.mu)
	return q
}

// push queues the leases of one claim together, so a slot never wakes to
// take part of one scope's share; it returns the ones it could not queue
// (closed or full), which the caller still owns.
func (q *readyQueue) push(ls []*lease) (refused []*lease) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, l := range ls {
		if q.closed || q.n >= q.capacity {
			return ls[i:]
		}
		s := l.r.Identity.Scope
		if len(q.byScope[s]) == 0 {
			q.turns = append(q.turns, s)
		}
		q.byScope[s] = append(q.byScope[s], l)
		q.n++
	}
	q.nonEmpty.Broadcast()
	return nil
}

// take waits for queued receipts and returns up to max of the scope whose
// turn it is, oldest first; nil once the queue is closed and empty.
func (q *readyQueue) take(max int) []*lease {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.nonEmpty.Wait()
	}
	return q.takeLocked(max)
}

// takeAll returns every queued receipt without waiting.
func (q *readyQueue) takeAll() []*lease {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*lease
	for q.n > 0 {
		out = append(out, q.takeLocked(q.n)...)
	}
	return out
}

// takeLocked takes up to max receipts of the next scope and moves that
// scope to the end of the turns if it has more. q.mu is held.
func (q *readyQueue) takeLocked(max int) []*lease {
	if q.n == 0 {
		return nil
	}
	s := q.turns[0]
	q.turns = q.turns[1:]
	list := q.byScope[s]
	k := min(max, len(list))
	out := list[:k:k]
	if rest := list[k:]; len(rest) > 0 {
		q.byScope[s] = rest
		q.turns = append(q.turns, s)
	} else {
		delete(q.byScope, s)
	}
	q.n -= k
	return out
}

// close ends the queue: slots take what is left and exit.
func (q *readyQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.nonEmpty.Broadcast()
}
