// Package doccheck keeps the code in pginbox's Markdown true: it reads every
// fenced block of README.md, CONTRIBUTING.md and docs/*.md with the marker
// comment on the line before it, and its tests compile, run or match each
// block as its marker says. CONTRIBUTING.md ("Code in the docs") states the
// convention; in short:
//
//	<!-- doc: program -->          a complete main package: compiled, and run with
//	                               DATABASE_URL naming an empty database; it must exit 0
//	<!-- doc: output -->           the block is what the program before it prints
//	<!-- doc: file -->             a complete Go file: compiled as a package of its own
//	<!-- doc: fragment NAME -->    compiled in place of the //doc:block line of
//	                               testdata/wrappers/NAME.go
//	<!-- doc: excerpt PATH -->     the block's lines appear, in order, in the
//	                               repository's file PATH (a line "// ..." skips lines)
//	<!-- scratch: file PATH -->    a file of the walkthrough's application
//	<!-- scratch: run -->          commands the walkthrough runs (internal/scratchtest)
//
// Every Go block needs one of these markers. Shell blocks are checked without
// a marker: make targets, the packages that go commands name, the directories
// cd enters, and (in cmd/inbox) every inbox command and flag.
package doccheck
