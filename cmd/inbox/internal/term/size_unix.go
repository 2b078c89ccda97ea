//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package term

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// Size returns the width and height of the terminal w writes to, in
// character cells; ok is false when w is not a terminal or its size is
// unknown.
func Size(w io.Writer) (cols, rows int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, 0, false
	}
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 || ws.Col == 0 || ws.Row == 0 {
		return 0, 0, false
	}
	return int(ws.Col), int(ws.Row), true
}
