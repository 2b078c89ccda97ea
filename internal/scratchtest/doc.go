// Package scratchtest holds the test that builds an application module outside
// the repository by following the walkthrough (docs/GETTING-STARTED.md): its
// <!-- scratch: file PATH --> blocks are the application's files and its
// <!-- scratch: run --> blocks the commands run on them, so the guide cannot
// drift from what works. internal/doccheck reads the blocks.
package scratchtest
