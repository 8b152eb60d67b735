package e2e_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// TestS3CacheDir: a dataset on the S3 server read through a node-local
// cache is read from the bucket once: a dataset opened again reads nothing
// from it, with every value its row's. Rewritten at the same size (another
// ETag), the object is planned anew and read from the bucket: the new
// version's rows, none of the cached old one's.
func TestS3CacheDir(t *testing.T) {
	sc := newScratch(t, scratch.S3)
	ctx := context.Background()
	cols := vc.Pick("id", "tag")
	planned, err := vc.Encode("parquet", cols, pinnedFirst, pinnedRows, 100)
	if err != nil {
		t.Fatal(err)
	}
	rewrite, err := vc.Encode("parquet", cols, pinnedOther, pinnedRows, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(planned) != len(rewrite) {
		t.Fatalf("versions of %d and %d bytes: want two of one size", len(planned), len(rewrite))
	}
	key := sc.Key + "cached/part.parquet"
	if err := sc.Bucket.WriteAll(ctx, key, planned, nil); err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	read := func(first int64) (bucket int64) {
		t.Helper()
		o := stream.Options{URLs: []string{sc.URL("cached/")}, Columns: []string{"id", "tag"}, BatchSize: 256, Shuffle: true, Seed: 9, CacheDir: cacheDir}
		var counted []*storage.Counting
		o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
			c := storage.NewCounting(b)
			counted = append(counted, c)
			return c
		}
		ds := open(t, o)
		var want []int64
		for id := first; id < first+pinnedRows; id++ {
			want = append(want, id)
		}
		if err := vc.Exactly(ds.Batches(ctx), o.Columns, want); err != nil {
			t.Fatal(err)
		}
		for _, c := range counted {
			bucket += c.Bytes()
		}
		if e := ds.Metrics().Snapshot().Epochs; len(e) == 0 || e[0].BucketBytes != bucket {
			t.Fatalf("metrics' epochs %+v, want the first's bucket bytes %d", e, bucket)
		}
		return bucket
	}
	if n := read(pinnedFirst); n == 0 || n > int64(len(planned)) {
		t.Fatalf("the first read fetched %d bytes of an object of %d", n, len(planned))
	}
	if n := read(pinnedFirst); n != 0 {
		t.Fatalf("opened again on the cache, %d bytes from the bucket; want 0", n)
	}
	if err := sc.Bucket.WriteAll(ctx, key, rewrite, nil); err != nil {
		t.Fatal(err)
	}
	if n := read(pinnedOther); n == 0 {
		t.Fatal("the rewritten object was served from the cache")
	}
}
