package storage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/sluicedata/sluice/storage"
)

// A directory or prefix that exists but holds no data file says so, and why;
// one that does not exist is not found. Both are ErrNotFound, which the CLI
// maps to its not-found exit status.
func TestResolveNoDataFiles(t *testing.T) {
	dir := tree(t, "spark/_SUCCESS", "spark/.part-0.parquet.crc", "text/notes.txt", "text/more.txt", "mixed/_SUCCESS", "mixed/a.csv")
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	memOpen := storage.Options{Open: func(context.Context, string) (*blob.Bucket, error) {
		return memBucket(t, map[string]string{"folder/": "", "csv/a.csv": "a", "csv/b.csv": "b"}), nil
	}}
	for _, c := range []struct {
		url    string
		opts   storage.Options
		noData bool
		says   []string
	}{
		{filepath.Join(dir, "empty"), storage.Options{}, true, []string{"a directory with no data files (empty)"}},
		{"file://" + filepath.ToSlash(filepath.Join(dir, "empty")) + "/", storage.Options{}, true, []string{"a directory with no data files (empty)"}},
		{filepath.Join(dir, "spark"), storage.Options{}, true, []string{"a directory with no data files", "2 files skipped for a name starting with", "such as .part-0.parquet.crc"}},
		{filepath.Join(dir, "text"), storage.Options{}, true, []string{"a directory with no data files (2 files of another format, such as more.txt)"}},
		{filepath.Join(dir, "mixed"), storage.Options{}, true, []string{"1 file of another format, such as a.csv; 1 file skipped for a name starting with '.' or '_', such as _SUCCESS)"}},
		{filepath.Join(dir, "text") + "/*.txt", storage.Options{}, true, []string{"no data files match the pattern (2 files of another format"}},
		{"mem://b/folder/", memOpen, true, []string{"mem://b/folder/: a prefix with no data files (empty)"}},
		{"mem://b/csv", memOpen, true, []string{"mem://b/csv: a prefix with no data files (2 files of another format, such as a.csv)"}},
		// Missing: no such directory, prefix or match.
		{filepath.Join(dir, "missing"), storage.Options{}, false, []string{"no object found"}},
		{filepath.Join(dir, "missing") + "/", storage.Options{}, false, []string{"no object found"}},
		{filepath.Join(dir, "text") + "/*.parquet", storage.Options{}, false, []string{"no object matches the pattern"}},
		{"mem://b/nothing/", memOpen, false, []string{"no object found"}},
	} {
		t.Run(c.url, func(t *testing.T) {
			r := storage.NewResolver(c.opts)
			defer r.Close()
			srcs, err := r.Resolve(context.Background(), c.url, isParquet)
			if err == nil {
				t.Fatalf("Resolve = %v, want an error", rels(srcs))
			}
			if !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("error is not ErrNotFound: %v", err)
			}
			if got := errors.Is(err, storage.ErrNoDataFiles); got != c.noData {
				t.Errorf("errors.Is(err, ErrNoDataFiles) = %t, want %t: %v", got, c.noData, err)
			}
			if c.noData && strings.Contains(err.Error(), "not found") {
				t.Errorf("an existing directory is reported as not found: %v", err)
			}
			for _, s := range append(c.says, c.url) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q: %v", s, err)
				}
			}
		})
	}
}
