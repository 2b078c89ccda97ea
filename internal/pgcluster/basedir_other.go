//go:build !linux

package pgcluster

// memoryBaseDir: see the Linux version. Elsewhere there is no standard
// memory file system.
func memoryBaseDir() string { return "" }
