//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package localcache

import (
	"errors"
	"os"
	"syscall"
)

// The locks are flock(2) locks: the kernel drops them when the process that
// holds them dies, however it dies, so a killed fetcher never leaves a
// block locked. They belong to an open file, so two goroutines of one
// process exclude each other as two processes do.

func lockingSupported() error { return nil }

// tryLockFile takes an exclusive lock on the file at path (created if
// missing) without waiting: ok is false where another holds it.
func tryLockFile(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// unlock releases a lock tryLockFile took: closing the file drops it.
func unlock(f *os.File) { f.Close() }
