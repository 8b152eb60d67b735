package storage_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/storage"
)

// A name with glob characters that exists is that file (or directory, or
// object) before it is a pattern; a pattern that names nothing still
// expands. Writers give such names: Spark partitions hold '=' only, but
// hand-made files are called data[1].csv and exports a*b.parquet.
func TestResolveExistingNameBeforePattern(t *testing.T) {
	dir := tree(t, "data[1].csv", "data1.csv", "a*b.parquet", "axb.parquet", "ayyb.parquet", "part[2]/x.parquet", "q?.parquet", "qz.parquet")
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		want []string
	}{
		{dir + "/data[1].csv", []string{"data[1].csv"}},                               // not data1.csv, which the pattern matches
		{"file://" + filepath.ToSlash(dir) + "/data[1].csv", []string{"data[1].csv"}}, // as a file:// URL too
		{dir + "/a*b.parquet", []string{"a*b.parquet"}},                               // not axb and ayyb
		{dir + "/q?.parquet", []string{"q?.parquet"}},
		{dir + "/part[2]", []string{"x.parquet"}},  // a directory of that name
		{dir + "/part[2]/", []string{"x.parquet"}}, // with its slash
		// Patterns that name no file still expand.
		{dir + "/data[0-9].csv", []string{"data1.csv"}},
		{dir + "/a?b.parquet", []string{"a*b.parquet", "axb.parquet"}},
		{dir + "/a*.parquet", []string{"a*b.parquet", "axb.parquet", "ayyb.parquet"}},
	} {
		r := storage.NewResolver(storage.Options{})
		srcs, err := r.Resolve(ctx, c.url, nil)
		r.Close()
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if got := rels(srcs); !slices.Equal(got, c.want) {
			t.Errorf("%s: Rel = %v, want %v", c.url, got, c.want)
		}
	}

	// On an object store, the object of that name (a HEAD finds it) too.
	o := &memOpener{bucket: memBucket(t, map[string]string{"d/data[1].csv": "x", "d/data1.csv": "y", "d/a*b.parquet": "z", "d/axb.parquet": "w"})}
	r := storage.NewResolver(storage.Options{Open: o.open})
	defer r.Close()
	for url, want := range map[string][]string{
		"mem://b/d/data[1].csv":    {"data[1].csv"},
		"mem://b/d/a*b.parquet":    {"a*b.parquet"},
		"mem://b/d/data[0-9].csv":  {"data1.csv"},
		"mem://b/d/a[x*]b.parquet": {"a*b.parquet", "axb.parquet"},
	} {
		srcs, err := r.Resolve(ctx, url, nil)
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		if got := rels(srcs); !slices.Equal(got, want) {
			t.Errorf("%s: Rel = %v, want %v", url, got, want)
		}
	}
	// A name that neither exists nor matches is not found, as before.
	if _, err := r.Resolve(ctx, "mem://b/d/data[2].csv", nil); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("data[2].csv: %v, want not found", err)
	}
}
