// Package scratchtest holds the test that builds an application module outside
// the repository by following README.md's "Your application, step by step"
// section: the README's marked blocks are the application's files and the
// commands run on them, so the README cannot drift from what works.
package scratchtest
