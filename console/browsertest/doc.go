// Package browsertest drives pginbox's web console in a real headless
// Chromium: the on-call path from the overview to a DEAD receipt, its
// requeue, and a worker completing it while the overview updates itself; and
// the skip of a DEAD receipt that holds its ordering key. It also writes the
// screenshots under docs/console (make screenshots).
//
// It is a module of its own so that importing pginbox never pulls a browser
// driver into an application's module graph.
package browsertest
