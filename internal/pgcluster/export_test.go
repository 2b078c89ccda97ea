package pgcluster

import "log/slog"

// Hooks for the external tests in package pgcluster_test.

// SweepStale removes leftover cluster directories under base.
func SweepStale(base string) { sweepStale(base, slog.New(slog.DiscardHandler)) }

// HaveParentDeathSignal reports whether servers die with their owner process.
func HaveParentDeathSignal() bool { return haveParentDeathSignal }

// SetDebianBinDirs replaces the /usr/lib/postgresql/*/bin pattern FindBinDir
// falls back to, and returns a function that restores it.
func SetDebianBinDirs(pattern string) (restore func()) {
	old := debianBinDirs
	debianBinDirs = pattern
	return func() { debianBinDirs = old }
}

// SetCitusStartHook makes StartCitus call f at its end and fail with f's
// error, and returns a function that removes the hook.
func SetCitusStartHook(f func(*Citus) error) (restore func()) {
	citusStartHook = f
	return func() { citusStartHook = nil }
}
