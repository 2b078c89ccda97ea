package main

import (
	"fmt"
	"io"
	"sync"
)

// console prints log lines and one live status line. On a terminal the status
// line is redrawn in place (\r) below the log lines; elsewhere (pipes, CI logs)
// each new status is printed as a plain line, and repeats are skipped.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	status string // shown at the bottom of a terminal
	last   string // last status printed as a plain line
}

func newLiveLine(e *env) *console {
	return &console{w: e.stdout, tty: e.tty}
}

const clearLine = "\r\033[K"

// set replaces the status line.
func (c *console) set(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tty {
		if s != c.last {
			fmt.Fprintln(c.w, s)
			c.last = s
		}
		return
	}
	c.status = s
	fmt.Fprint(c.w, clearLine+s)
}

// printf prints a log line above the status line.
func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && c.status != "" {
		fmt.Fprint(c.w, clearLine)
	}
	fmt.Fprintf(c.w, format, args...)
	if c.tty && c.status != "" {
		fmt.Fprint(c.w, c.status)
	}
}

// done ends the status line, leaving its last state on screen.
func (c *console) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && c.status != "" {
		fmt.Fprintln(c.w)
	}
	c.status, c.last = "", ""
}
