// Package settle holds what the transport consumers share
// to settle a message the inbox will not take: the dead-letter reasons, and
// the last error of messages being retried.
package settle

import (
	"errors"
	"sync"

	"github.com/pginbox/pginbox/inbox"
)

// Dead-letter reasons.
const (
	ReasonDecode        = "decode"         // the adapter's Decode failed, or the message has no ID
	ReasonInvalid       = "invalid"        // the inbox rejected the message (*inbox.ValidationError)
	ReasonConflict      = "conflict"       // the identity is stored with other content (*inbox.ConflictError)
	ReasonDeliveryLimit = "delivery_limit" // delivered too often without an accept
)

// Reason is the dead-letter reason of an error for which inbox.ActionFor
// says reject.
func Reason(err error) string {
	if errors.Is(err, inbox.ErrIdentityConflict) {
		return ReasonConflict
	}
	return ReasonInvalid
}

// Receipt is the ID of the stored receipt a conflict names, or "".
func Receipt(err error) string {
	var conflict *inbox.ConflictError
	if errors.As(err, &conflict) {
		return conflict.ReceiptID.String()
	}
	return ""
}

// maxRemembered bounds LastErrors; past it, new reasons are not kept (a dead
// letter then says the last error is unknown).
const maxRemembered = 10000

// LastErrors remembers why each message (by a broker key) was last retried,
// for the dead letter written when its deliveries run out. The zero value is
// ready; it is safe for concurrent use.
type LastErrors[K comparable] struct {
	mu sync.Mutex
	m  map[K]string
}

// Remember records err for k.
func (l *LastErrors[K]) Remember(k K, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[K]string)
	}
	if _, ok := l.m[k]; ok || len(l.m) < maxRemembered {
		l.m[k] = err.Error()
	}
}

// Forget drops k.
func (l *LastErrors[K]) Forget(k K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, k)
}

// Recall returns and forgets k's last error.
func (l *LastErrors[K]) Recall(k K) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	reason, ok := l.m[k]
	delete(l.m, k)
	if !ok {
		return "unknown here (another consumer instance, or a restart, handled the last try)"
	}
	return reason
}
