package handler

import (
	"errors"
	"fmt"
)

// ErrNilHandler matches the error for registering a nil handler.
var ErrNilHandler = errors.New("handler is nil")

// Entry is one handler registration: the key and the function handling it.
type Entry struct {
	Key  Key  // what it handles
	Func Func // how; must not be nil
}

// RegisterAll registers every entry, or none: if any entry is invalid or its
// key is taken (already in the registry, or given twice), the registry is left
// as it was. A taken key is an error matching ErrDuplicateHandler, a nil Func
// one matching ErrNilHandler. Generated Register functions call it with all
// the events of one consumer, so a consumer is never half-registered.
func (r *Registry) RegisterAll(entries ...Entry) error {
	if r == nil {
		return errors.New("pginbox: registering handlers: the registry is nil: create it with handler.NewRegistry()")
	}
	seen := make(map[Key]bool, len(entries))
	for _, e := range entries {
		if e.Func == nil {
			return fmt.Errorf("pginbox: registering %s: %w: pass the function that handles it", e.Key, ErrNilHandler)
		}
		k := e.Key
		if k.Consumer == "" || k.EventType == "" || k.SchemaVersion < 1 {
			return fmt.Errorf("pginbox: registering %s: consumer, event type and a schema version >= 1 are required", k)
		}
		if _, dup := r.handlers[k]; dup || seen[k] {
			return fmt.Errorf("pginbox: registering %s: %w: register one handler per consumer, event type and version", k, ErrDuplicateHandler)
		}
		seen[k] = true
	}
	for _, e := range entries {
		r.handlers[e.Key] = e.Func
		r.consumers[e.Key.Consumer] = true
	}
	return nil
}
