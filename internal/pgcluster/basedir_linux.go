//go:build linux

package pgcluster

import "syscall"

// memoryBaseDir returns /dev/shm if it is a tmpfs that is writable by
// everyone and has room for a few clusters; otherwise "". Containers often
// have a tiny /dev/shm (64 MB in Docker), hence the free-space check.
func memoryBaseDir() string {
	const dir = "/dev/shm"
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != tmpfsMagic {
		return ""
	}
	if free := uint64(st.Bavail) * uint64(st.Bsize); free < 1<<30 {
		return ""
	}
	var fi syscall.Stat_t
	if err := syscall.Stat(dir, &fi); err != nil || fi.Mode&0o1777 != 0o1777 {
		return ""
	}
	return dir
}
