package faults

import (
	"fmt"
	"os"
	"time"
)

// RewriteFile writes data over the local file at path in place (the same
// inode, as an editor that saves in place or a job that rewrites its output
// does), for tests of reads pinned to the version planned. data is usually
// the file's size, so that nothing but the bytes tells. It returns once the
// file's modification time has moved: a write within the file system's
// clock tick of the last one keeps the time it had, so it writes again a
// moment later, as a rewrite made after planning would have.
func RewriteFile(path string, data []byte) error {
	before, err := os.Stat(path)
	if err != nil {
		return err
	}
	for range 1000 {
		if err := writeOver(path, data); err != nil {
			return err
		}
		after, err := os.Stat(path)
		if err != nil {
			return err
		}
		if !after.ModTime().Equal(before.ModTime()) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("rewrite %s: its modification time stays %s", path, before.ModTime())
}

func writeOver(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReplaceFile puts data at path as a new file (another inode, renamed over
// the old one, as most writers and copy tools replace a file) with the old
// file's modification time, so that only the inode tells.
func ReplaceFile(path string, data []byte) error {
	before, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".replacing"
	if err := os.WriteFile(tmp, data, before.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Chtimes(tmp, before.ModTime(), before.ModTime()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
