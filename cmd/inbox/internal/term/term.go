// Package term tells whether output goes to a terminal, so progress lines can
// redraw in place there and print plainly in logs and pipes.
package term

import (
	"io"
	"os"
)

// IsTerminal reports whether w is a character device (a terminal), using only
// the standard library.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
