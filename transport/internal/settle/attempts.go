package settle

import "sync"

// maxCounted bounds Attempts; past it, the counts start again, as after a
// restart of the consumer: that only lengthens the retries of a message
// some more.
const maxCounted = 10000

// Attempts counts the failed accepts of the messages being retried, for the
// brokers that keep no delivery count (Kafka, MQTT): the consumer keeps it,
// so a restart of the consumer starts it again. The zero value is ready; it
// is safe for concurrent use.
type Attempts[K comparable] struct {
	mu sync.Mutex
	m  map[K]int
}

// Fail counts a failed accept of k and returns how many there were.
func (a *Attempts[K]) Fail(k K) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) >= maxCounted && a.m[k] == 0 {
		a.m = make(map[K]int)
	}
	a.m[k]++
	return a.m[k]
}

// Failed reports whether an accept of k failed since it was last forgotten.
func (a *Attempts[K]) Failed(k K) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[k] > 0
}

// Forget drops k's count: it was accepted or dead-lettered.
func (a *Attempts[K]) Forget(k K) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, k)
}
