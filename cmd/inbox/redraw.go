package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// screen redraws a block of text in place on a terminal (inbox stats
// --watch): each frame replaces the last one however its lines wrapped, so
// the view neither scrolls nor leaves pieces of older frames behind. It
// counts the rows the last frame took at the terminal's width, moves the
// cursor back up that many and erases downwards. A frame taller than the
// terminal is cut: rows that scroll off the screen can never be redrawn.
type screen struct {
	w io.Writer
	// size reports the terminal's columns and rows; ok false when unknown.
	size func() (cols, rows int, ok bool)

	drawn      int // rows the last frame took; 0 before the first
	cols, rows int // the size it was drawn at
}

// draw replaces the last frame with text, lines ending in "\n".
func (s *screen) draw(text string) error {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	cols, rows, ok := s.size()
	var b strings.Builder
	switch {
	case !ok:
		// Without the size the rows cannot be counted: start over at the top.
		b.WriteString(clearScreen)
	case s.drawn == 0:
		// The first frame goes where the cursor is, below the command line.
		b.WriteString("\r\x1b[J")
	case cols != s.cols || rows != s.rows:
		// Resized: the terminal rewrapped the last frame its own way.
		b.WriteString(clearScreen)
	default:
		fmt.Fprintf(&b, "\r\x1b[%dA\x1b[J", s.drawn)
	}
	if ok {
		lines = fitRows(lines, cols, rows-1) // the cursor's line stays free
	}
	for _, l := range lines {
		// No erase-to-end-of-line here: after a line exactly as wide as the
		// terminal it would erase the line's last character.
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if ok {
		s.drawn, s.cols, s.rows = screenRows(lines, cols), cols, rows
	}
	_, err := io.WriteString(s.w, b.String())
	return err
}

// fitRows cuts lines to at most max rows of a terminal cols wide, the last
// one saying what was left out.
func fitRows(lines []string, cols, max int) []string {
	if screenRows(lines, cols) <= max {
		return lines
	}
	var out []string
	used := 0
	for _, l := range lines {
		n := screenRows([]string{l}, cols)
		if used+n > max-1 {
			break
		}
		out = append(out, l)
		used += n
	}
	note := fmt.Sprintf("… %d more lines: enlarge the terminal, or run without --watch", len(lines)-len(out))
	return append(out, cutWidth(note, cols))
}

// screenRows is how many terminal rows lines take at cols columns: a line
// wider than the terminal wraps, and a wide character (CJK, emoji) that
// does not fit at the end of a row moves to the next one.
func screenRows(lines []string, cols int) int {
	n := 0
	for _, l := range lines {
		row, col := 1, 0
		for _, r := range l {
			w := runeWidth(r)
			if col+w > cols {
				row, col = row+1, 0
			}
			col += w
		}
		n += row
	}
	return n
}

// runeWidth is the number of terminal cells r takes: 0 for combining marks,
// 2 for the wide characters of East Asian scripts, fullwidth forms and
// emoji, 1 for the rest. It covers the common ranges, not every one of
// Unicode's East Asian Width table, to keep the CLI's dependencies those of
// the library. Text reaching the terminal has passed visible.String, so
// there are no control characters.
func runeWidth(r rune) int {
	switch {
	case r < 0x1100:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) ||
		r >= 0x1100 && r <= 0x115f || // Hangul leading consonants
		r >= 0xac00 && r <= 0xd7a3 || // Hangul syllables
		r >= 0x2e80 && r <= 0x303e || // CJK radicals, symbols and punctuation
		r >= 0x3130 && r <= 0x318f || // Hangul compatibility jamo
		r >= 0xff00 && r <= 0xff60 || r >= 0xffe0 && r <= 0xffe6 || // fullwidth forms
		r >= 0x1f300 && r <= 0x1f64f || r >= 0x1f900 && r <= 0x1f9ff: // emoji
		return 2
	}
	return 1
}

// textWidth is the number of terminal cells s takes on one line.
func textWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

// cutWidth shortens s to at most n cells, marking the cut with "…".
func cutWidth(s string, n int) string {
	if textWidth(s) <= n {
		return s
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		w := runeWidth(r)
		if used+w > n-1 {
			break
		}
		b.WriteRune(r)
		used += w
	}
	return b.String() + "…"
}
