package main

import (
	"strconv"
	"strings"
	"testing"
)

// vt is a terminal of cols x rows cells, enough of one to check what a
// redrawing command leaves on screen: printable characters with autowrap
// (a character that does not fit moves to the next row, as xterm does), "\n"
// as CR LF (a tty's output processing), "\r", and the CSI sequences the CLI
// writes: cursor up (A), cursor home (H), erase in display (J, 2J) and in
// line (K). Rows scrolled off the top are counted in scrolled.
type vt struct {
	t          *testing.T
	cols, rows int
	cells      [][]rune
	row, col   int
	scrolled   int
}

func newVT(t *testing.T, cols, rows int) *vt {
	v := &vt{t: t, cols: cols, rows: rows}
	for range rows {
		v.cells = append(v.cells, v.blank())
	}
	return v
}

func (v *vt) blank() []rune { return []rune(strings.Repeat(" ", v.cols)) }

func (v *vt) Write(p []byte) (int, error) {
	s := []rune(string(p))
	for i := 0; i < len(s); i++ {
		switch r := s[i]; {
		case r == '\n':
			v.col = 0
			v.lineFeed()
		case r == '\r':
			v.col = 0
		case r == 0x1b:
			i = v.csi(s, i)
		case r < 0x20 || r == 0x7f:
			v.t.Errorf("vt: raw control character %U written to the terminal", r)
		default:
			w := runeWidth(r)
			if v.col+w > v.cols {
				v.col = 0
				v.lineFeed()
			}
			v.cells[v.row][v.col] = r
			for j := 1; j < w; j++ {
				v.cells[v.row][v.col+j] = 0 // the right half of a wide character
			}
			v.col += w
		}
	}
	return len(p), nil
}

func (v *vt) lineFeed() {
	if v.row < v.rows-1 {
		v.row++
		return
	}
	v.cells = append(v.cells[1:], v.blank())
	v.scrolled++
}

// csi interprets the escape sequence at s[i] and returns the index of its
// last rune. Writes come from the command's goroutine: problems are
// reported with Errorf, and the sequence is skipped.
func (v *vt) csi(s []rune, i int) int {
	if i+1 >= len(s) || s[i+1] != '[' {
		v.t.Errorf("vt: unsupported escape %q", string(s[i:min(len(s), i+6)]))
		return i
	}
	j := i + 2
	for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
		j++
	}
	if j >= len(s) {
		v.t.Errorf("vt: unterminated escape %q", string(s[i:]))
		return len(s) - 1
	}
	arg := string(s[i+2 : j])
	n, _ := strconv.Atoi(arg)
	switch s[j] {
	case 'A':
		v.row = max(0, v.row-max(1, n))
	case 'H':
		v.row, v.col = 0, 0
	case 'J':
		switch arg {
		case "", "0":
			v.cells[v.row] = append(v.cells[v.row][:v.col], v.blank()[v.col:]...)
			for r := v.row + 1; r < v.rows; r++ {
				v.cells[r] = v.blank()
			}
		case "2":
			for r := range v.rows {
				v.cells[r] = v.blank()
			}
		default:
			v.t.Errorf("vt: unsupported erase %q", arg)
		}
	case 'K':
		v.cells[v.row] = append(v.cells[v.row][:min(v.col, v.cols)], v.blank()[min(v.col, v.cols):]...)
	default:
		v.t.Errorf("vt: unsupported escape %q", string(s[i:j+1]))
	}
	return j
}

// screen is what the terminal shows, one string per row, trailing blanks cut.
func (v *vt) screen() []string {
	out := make([]string, v.rows)
	for r, cells := range v.cells {
		var b strings.Builder
		for _, c := range cells {
			if c != 0 {
				b.WriteRune(c)
			}
		}
		out[r] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// text is the screen as one string, rows joined without separators or
// trimming, so a line the terminal wrapped reads whole again.
func (v *vt) text() string {
	var b strings.Builder
	for _, cells := range v.cells {
		for _, c := range cells {
			if c != 0 {
				b.WriteRune(c)
			}
		}
	}
	return b.String()
}

func (v *vt) size() (int, int, bool) { return v.cols, v.rows, true }

func TestVTWrapsAndScrolls(t *testing.T) {
	t.Parallel()
	v := newVT(t, 4, 3)
	v.Write([]byte("abcdef\n注x\n1234\n"))
	if got := strings.Join(v.screen(), "|"); got != "注x|1234|" || v.scrolled != 2 {
		t.Fatalf("screen %q, scrolled %d", got, v.scrolled)
	}
	v.Write([]byte("\x1b[2A\r\x1b[Jz"))
	if got := strings.Join(v.screen(), "|"); got != "z||" {
		t.Fatalf("after erase: %q", got)
	}
}
