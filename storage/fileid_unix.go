//go:build unix

package storage

import (
	"os"
	"strconv"
	"syscall"
)

// fileID is a local file's inode number, "" where the system gives none.
// The device is left out: its number can change between boots (NFS), and
// a version kept in a plan cache must outlive one.
func fileID(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return strconv.FormatUint(uint64(st.Ino), 10)
}
