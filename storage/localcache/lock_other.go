//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package localcache

import (
	"errors"
	"os"
)

// The cache's processes coordinate through flock(2), which this system
// lacks: Open refuses rather than let two processes write one block.

func lockingSupported() error {
	return errors.New("localcache: the local cache needs flock(2) (Linux, macOS or a BSD)")
}

func tryLockFile(string) (*os.File, bool, error) { return nil, false, lockingSupported() }

func unlock(f *os.File) { f.Close() }
