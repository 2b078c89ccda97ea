//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package term

import "io"

// Size reports the terminal's size where the standard library can ask for
// it; here it cannot, so live output falls back to clearing the screen.
func Size(w io.Writer) (cols, rows int, ok bool) { return 0, 0, false }
