package scratchtest

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Marker comments in README.md, each followed by a fenced block:
//
//	<!-- scratch: run -->          the block's shell commands run in the app's directory
//	<!-- scratch: file PATH -->    the block is the app's file PATH
const markerPrefix = "<!-- scratch:"

// Step is one marked block of the README, in README order.
type Step struct {
	Line int    // the marker's line number
	Run  bool   // commands to run; otherwise a file to write
	Path string // the file's path inside the app's directory
	Body string // the block's content, ending with a newline
}

// Parse returns the marked blocks of a README.
func Parse(r io.Reader) ([]Step, error) {
	sc := bufio.NewScanner(r)
	var (
		steps []Step
		cur   *Step // a marker waiting for its block, or a block being read
		in    bool  // inside cur's fence
		body  strings.Builder
		n     int
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case in && strings.TrimSpace(line) == "```":
			cur.Body = body.String()
			steps = append(steps, *cur)
			cur, in = nil, false
			body.Reset()
		case in:
			body.WriteString(line + "\n")
		case cur != nil && strings.HasPrefix(line, "```"):
			in = true
		case cur != nil && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("README line %d: the marker on line %d must be followed by a fenced block", n, cur.Line)
		case strings.HasPrefix(line, markerPrefix):
			s, err := parseMarker(n, line)
			if err != nil {
				return nil, err
			}
			cur = &s
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("README line %d: marker without a complete fenced block", cur.Line)
	}
	return steps, nil
}

func parseMarker(n int, line string) (Step, error) {
	arg, ok := strings.CutSuffix(strings.TrimSpace(strings.TrimPrefix(line, markerPrefix)), "-->")
	if !ok {
		return Step{}, fmt.Errorf("README line %d: %q: a marker is one line ending in -->", n, line)
	}
	f := strings.Fields(arg)
	switch {
	case len(f) == 1 && f[0] == "run":
		return Step{Line: n, Run: true}, nil
	case len(f) == 2 && f[0] == "file" && !strings.HasPrefix(f[1], "/") && !strings.Contains(f[1], ".."):
		return Step{Line: n, Path: f[1]}, nil
	}
	return Step{}, fmt.Errorf("README line %d: %q: want <!-- scratch: run --> or <!-- scratch: file relative/path -->", n, line)
}
