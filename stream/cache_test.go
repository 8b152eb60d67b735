package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck/matrix"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/localcache"
	"github.com/sluicedata/sluice/stream"
)

// The cache leaves file:// alone (a local file is on local disk already),
// so these tests read local files as the objects of a bucket of another
// scheme, cachedfile:// (gocloud's fileblob rooted at /), which the cache
// wraps as it wraps s3://.
const cachedScheme = "cachedfile://"

func cachedURL(path string) string { return cachedScheme + path }

func openCachedFiles(context.Context, string) (*blob.Bucket, error) {
	return fileblob.OpenBucket("/", &fileblob.Options{NoTempDir: true})
}

// TestValueMatrixCached is the value matrix (TestValueMatrix) with every
// read through a node-local cache of small blocks (so reads span several)
// under a bound far smaller than the data (so blocks are evicted while
// cases read): every value still its row's, every row as each mode
// promises.
func TestValueMatrixCached(t *testing.T) {
	set := matrix.Write(t)
	for i := range set.Datasets {
		for j, u := range set.Datasets[i].URLs {
			set.Datasets[i].URLs[j] = cachedURL(u)
		}
	}
	other := *set.Other
	other.URLs = []string{cachedURL(other.URLs[0])}
	set.Other = &other
	c, err := localcache.Open(localcache.Options{Dir: t.TempDir(), BlockBytes: 12 << 10, MaxBytes: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	set.Tune = func(o *stream.Options) {
		o.Storage.Open = openCachedFiles
		o.Storage.Cache = c.Wrap
	}
	budget, least := 15*time.Second, 8
	if testing.Short() {
		budget, least = 4*time.Second, 3
	}
	start := time.Now()
	ran := 0
	for i := 0; ran < least || time.Since(start) < budget; i++ {
		seed := *valueSeed + uint64(i)
		cs := matrix.Draw(set, matrix.NewSeeded(seed))
		if err := cs.Run(context.Background()); err != nil {
			t.Fatalf("case seed %d (%s): %v\nrerun: go test ./stream -run TestValueMatrixCached -valuecheck.seed %d", seed, cs, err, seed)
		}
		ran++
	}
	s := c.Stats()
	if s.HitBytes == 0 || s.FetchedBytes == 0 || s.Evictions == 0 {
		t.Fatalf("the cache was not in the path as meant: %+v", s)
	}
	t.Logf("%d cases in %v; cache %+v", ran, time.Since(start).Round(time.Millisecond), s)
}

// TestCacheDirEpochs: with Options.CacheDir, the second epoch and a
// restarted dataset read nothing from the bucket, every row exactly once
// with its values, and the metrics say what each epoch read from where.
func TestCacheDirEpochs(t *testing.T) {
	dir := t.TempDir()
	const files, rows = 3, 2000
	for f := range files {
		if err := vc.WriteParquet(filepath.Join(dir, "part-"+string(rune('a'+f))+".parquet"), vc.All, int64(f)*rows, rows, vc.Parquet{RowGroupRows: 300}); err != nil {
			t.Fatal(err)
		}
	}
	var want []int64
	for id := range int64(files * rows) {
		want = append(want, id)
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	o := stream.Options{
		URLs: []string{cachedURL(dir)}, Shuffle: true, Seed: 3, BatchSize: 500,
		CacheDir: cacheDir, CacheBytes: 64 << 20,
		Storage: storage.Options{Open: openCachedFiles},
	}
	epochs := func(n int) []int64 {
		t.Helper()
		ds, err := stream.Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		cols := ds.Schema().Fields()
		names := make([]string, len(cols))
		for i, f := range cols {
			names[i] = f.Name
		}
		for range n {
			if err := vc.Exactly(ds.Batches(context.Background()), names, want); err != nil {
				t.Fatal(err)
			}
		}
		var bucket []int64
		s := ds.Metrics().Snapshot()
		for _, e := range s.Epochs {
			bucket = append(bucket, e.BucketBytes)
		}
		if len(s.Epochs) != n+1 || s.Epochs[n].BucketBytes != 0 { // the epoch after, begun, reads nothing
			t.Fatalf("epochs %+v", s.Epochs)
		}
		if s.Epochs[n-1].CacheHitBytes == 0 {
			t.Fatalf("the last epoch read nothing from the cache: %+v", s.Epochs)
		}
		return bucket[:n]
	}
	first := epochs(2)
	var size int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, _ := e.Info()
		size += info.Size()
	}
	if first[0] <= 0 || first[0] > size || first[1] != 0 {
		t.Fatalf("bytes from the bucket by epoch %v, want the files' %d at most and then none", first, size)
	}
	if again := epochs(1); again[0] != 0 {
		t.Fatalf("a dataset opened again on the cache read %d bytes from the bucket", again[0])
	}
}

// TestCacheOptionsRefused: a bound that holds fewer than two blocks, a
// negative one, and CacheDir with Storage.Cache are refused at Open,
// naming the options.
func TestCacheOptionsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := vc.WriteParquet(filepath.Join(dir, "part.parquet"), vc.All, 0, 10, vc.Parquet{}); err != nil {
		t.Fatal(err)
	}
	wrap := func(_ string, b storage.Bucket) storage.Bucket { return b }
	for _, c := range []struct {
		o    stream.Options
		want string
	}{
		{stream.Options{CacheDir: t.TempDir(), CacheBytes: 1 << 20}, "CacheBytes 1048576"},
		{stream.Options{CacheDir: t.TempDir(), CacheBytes: -1}, "CacheBytes -1"},
		{stream.Options{CacheDir: t.TempDir(), Storage: storage.Options{Cache: wrap}}, "CacheDir and Storage.Cache"},
	} {
		c.o.URLs = []string{cachedURL(dir)}
		c.o.Storage.Open = openCachedFiles
		ds, err := stream.Open(context.Background(), c.o)
		if err == nil {
			ds.Close()
			t.Fatalf("%+v opened", c.o)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not say %q", err, c.want)
		}
	}
}
