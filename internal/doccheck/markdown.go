package doccheck

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File   string // the file's path relative to the repository root, slash-separated
	Line   int    // the opening fence's line
	Lang   string // the fence's language: go, sh, sql, ...
	Marker Marker // the marker on the lines before the fence; zero if none
	Body   string // the block's lines, each ending with a newline
}

// Marker is a comment that says how a block is checked:
// <!-- KIND: ARGS -->, KIND being doc or scratch.
type Marker struct {
	Kind string   // "doc" or "scratch"
	Args []string // what follows the kind
	Line int      // the Markdown line of the comment
}

// Where names the block as file:line, for messages.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Is reports whether the block carries the marker kind with the first
// argument arg.
func (b Block) Is(kind, arg string) bool {
	return b.Marker.Kind == kind && len(b.Marker.Args) > 0 && b.Marker.Args[0] == arg
}

// Arg returns the marker's argument i, or "".
func (m Marker) Arg(i int) string {
	if i < len(m.Args) {
		return m.Args[i]
	}
	return ""
}

var markerKinds = []string{"doc", "scratch"}

// Files returns the Markdown files whose blocks are checked, relative to
// root: README.md, CONTRIBUTING.md and docs/*.md.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		out = append(out, "docs/"+filepath.Base(d))
	}
	return out, nil
}

// ParseFile parses root/name.
func ParseFile(root, name string) ([]Block, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(name, f)
}

// ParseAll parses every file Files returns.
func ParseAll(root string) ([]Block, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var all []Block
	for _, name := range files {
		bs, err := ParseFile(root, name)
		if err != nil {
			return nil, err
		}
		all = append(all, bs...)
	}
	return all, nil
}

// Parse returns the fenced blocks of one Markdown file, each with the marker
// written on the line before its fence (blank lines may come between). A
// marker followed by anything else is an error, so a marker cannot silently
// stop applying.
func Parse(name string, r io.Reader) ([]Block, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var (
		blocks []Block
		cur    *Block // a block being read
		marker *Marker
		body   strings.Builder
		n      int
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.Body = body.String()
			blocks = append(blocks, *cur)
			cur = nil
			body.Reset()
		case cur != nil:
			body.WriteString(line + "\n")
		case strings.HasPrefix(line, "```"):
			cur = &Block{File: name, Line: n, Lang: strings.Fields(strings.TrimPrefix(line, "```") + " x")[0]}
			if cur.Lang == "x" {
				cur.Lang = ""
			}
			if marker != nil {
				cur.Marker = *marker
				marker = nil
			}
		case marker != nil && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("%s:%d: the marker on line %d must be followed by a fenced block", name, n, marker.Line)
		case isMarker(line):
			m, err := parseMarker(name, n, line)
			if err != nil {
				return nil, err
			}
			marker = &m
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the fenced block never ends", name, cur.Line)
	}
	if marker != nil {
		return nil, fmt.Errorf("%s:%d: marker without a fenced block after it", name, marker.Line)
	}
	return blocks, nil
}

func isMarker(line string) bool {
	for _, k := range markerKinds {
		if strings.HasPrefix(line, "<!-- "+k+":") {
			return true
		}
	}
	return false
}

func parseMarker(name string, n int, line string) (Marker, error) {
	inner, ok := strings.CutSuffix(strings.TrimSpace(strings.TrimPrefix(line, "<!--")), "-->")
	if !ok {
		return Marker{}, fmt.Errorf("%s:%d: %q: a marker is one line ending in -->", name, n, line)
	}
	kind, arg, _ := strings.Cut(inner, ":")
	m := Marker{Kind: strings.TrimSpace(kind), Args: strings.Fields(arg), Line: n}
	want := map[string][]string{
		"doc":     {"program", "output", "file", "fragment NAME", "excerpt PATH"},
		"scratch": {"run", "file PATH"},
	}[m.Kind]
	for _, w := range want {
		f := strings.Fields(w)
		if len(m.Args) == len(f) && m.Args[0] == f[0] {
			if len(f) == 2 && !localPath(m.Args[1]) {
				return Marker{}, fmt.Errorf("%s:%d: %q: want a relative path, without \"..\"", name, n, line)
			}
			return m, nil
		}
	}
	return Marker{}, fmt.Errorf("%s:%d: %q: want <!-- %s: %s -->", name, n, line, m.Kind,
		strings.Join(slices.Clip(want), " --> or <!-- "+m.Kind+": "))
}

func localPath(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && !slices.Contains(strings.Split(p, "/"), "..")
}
