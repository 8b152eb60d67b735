package storage_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/faults"
	"github.com/sluicedata/sluice/storage"
)

// resolveOne resolves url to one object.
func resolveOne(t *testing.T, res *storage.Resolver, url string) storage.Source {
	t.Helper()
	srcs, err := res.Resolve(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 1 {
		t.Fatalf("%s: %d objects", url, len(srcs))
	}
	return srcs[0]
}

// readAll reads the whole object through its planned description.
func readAll(src storage.Source) ([]byte, error) {
	p := make([]byte, src.Object.Size)
	_, err := src.ReaderAt(context.Background()).ReadAt(p, 0)
	return p, err
}

// changed checks that err is the read of a changed object: ErrChanged,
// naming the object, what was planned and what was found.
func changed(t *testing.T, err error, url string, says ...string) *storage.ChangedError {
	t.Helper()
	if !errors.Is(err, storage.ErrChanged) {
		t.Fatalf("read of a changed %s: %v, want storage.ErrChanged", url, err)
	}
	var ce *storage.ChangedError
	if !errors.As(err, &ce) {
		t.Fatalf("%v: no *storage.ChangedError", err)
	}
	for _, s := range append([]string{url, "planned", "found"}, says...) {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	return ce
}

func TestLocalReadsArePinned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	old := []byte("id\n1\n2\n3\n")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	res := storage.NewResolver(storage.Options{})
	defer res.Close()
	for _, url := range []string{path, dir + "/"} { // a stat and a listing describe it alike
		src := resolveOne(t, res, url)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		ino := strconv.FormatUint(st.Sys().(*syscall.Stat_t).Ino, 10)
		if src.Object.Version != ino || src.Object.Size != st.Size() || !src.Object.ModTime.Equal(st.ModTime()) {
			t.Fatalf("%s: object %+v, want inode %s, size %d, modified %s", url, src.Object, ino, st.Size(), st.ModTime())
		}
		if got, err := readAll(src); err != nil || !bytes.Equal(got, old) {
			t.Fatalf("%s unchanged: read %q, %v", url, got, err)
		}
	}
	src := resolveOne(t, res, path)

	// Rewritten in place at the same size: the bytes would read as values
	// of the new version.
	if err := faults.RewriteFile(path, []byte("id\n7\n8\n9\n")); err != nil {
		t.Fatal(err)
	}
	_, err := readAll(src)
	ce := changed(t, err, "file://"+path, "modified")
	if ce.Planned.ModTime.Equal(ce.Found.ModTime) || ce.Found.Size != int64(len(old)) || ce.Found.Version != src.Object.Version {
		t.Errorf("planned %+v, found %+v", ce.Planned, ce.Found)
	}

	// Replaced by another file of the same size and modification time:
	// only the inode tells.
	src = resolveOne(t, res, path)
	if err := faults.ReplaceFile(path, []byte("id\n4\n5\n6\n")); err != nil {
		t.Fatal(err)
	}
	_, err = readAll(src)
	ce = changed(t, err, "file://"+path, "inode "+src.Object.Version)
	if !ce.Planned.ModTime.Equal(ce.Found.ModTime) || ce.Found.Version == src.Object.Version {
		t.Errorf("planned %+v, found %+v", ce.Planned, ce.Found)
	}

	// Grown: another size.
	src = resolveOne(t, res, path)
	if err := faults.RewriteFile(path, []byte("id\n4\n5\n6\n7\n")); err != nil {
		t.Fatal(err)
	}
	_, err = readAll(src)
	changed(t, err, "file://"+path, "size 9 planned, 11 found")

	// A changed object is an answer, not a fault: it is not retried.
	var counting *storage.Counting
	counted := storage.NewResolver(storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		counting = storage.NewCounting(b)
		return counting
	}})
	defer counted.Close()
	src = resolveOne(t, counted, path)
	if err := faults.RewriteFile(path, []byte("id\n4\n5\n6\n8\n")); err != nil {
		t.Fatal(err)
	}
	counting.Reset()
	if _, err := readAll(src); !errors.Is(err, storage.ErrChanged) {
		t.Fatal(err)
	}
	if n := counting.Requests(); n != 1 {
		t.Errorf("a read of a changed file made %d requests, want 1", n)
	}
}

// A listed symbolic link is described by its target, as its reads see it.
func TestLocalListedLinkIsItsTarget(t *testing.T) {
	dir := t.TempDir()
	data := []byte("id\n1\n2\n3\n4\n5\n")
	target := filepath.Join(t.TempDir(), "real.csv")
	if err := os.WriteFile(target, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "a.csv")); err != nil {
		t.Fatal(err)
	}
	res := storage.NewResolver(storage.Options{})
	defer res.Close()
	src := resolveOne(t, res, dir+"/")
	if src.Object.Size != int64(len(data)) {
		t.Fatalf("listed link: size %d, want its target's %d", src.Object.Size, len(data))
	}
	if got, err := readAll(src); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %q, %v", got, err)
	}
}
