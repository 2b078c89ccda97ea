package service

import "log/slog"

// Base is what a service's loops log with. Each service keeps one and hands
// it to its Listener and Ticker.
type Base struct {
	// Name is the service's name in log messages: "worker" logs
	// "pginbox worker: ...".
	Name string
	Log  *slog.Logger // where the loops log
}

// prefix returns msg as the service logs it.
func (b Base) prefix(msg string) string { return "pginbox " + b.Name + ": " + msg }
