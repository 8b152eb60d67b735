package checkpoint_test

import (
	"context"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/internal/storetest"
)

// TestStores runs the store suite against bucket stores; package
// pebblestore runs it against its own, so that every store keeps the same
// contract.
func TestStores(t *testing.T) {
	t.Run("memblob", func(t *testing.T) {
		storetest.Store(t, func(t *testing.T) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout) {
			return openBucketStore(t, memblob.OpenBucket(nil))
		})
	})
	t.Run("fileblob", func(t *testing.T) {
		storetest.Store(t, func(t *testing.T) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout) {
			b, err := fileblob.OpenBucket(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return openBucketStore(t, b)
		})
	})
}

// openBucketStore opens a store under a prefix of bucket, closing both when
// the test ends.
func openBucketStore(t *testing.T, bucket *blob.Bucket) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout) {
	t.Helper()
	s, err := checkpoint.OpenBucketStore(context.Background(), bucket, "jobs/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		storetest.CloseStore(t, s)
		if err := bucket.Close(); err != nil {
			t.Error(err)
		}
	})
	b, l, _ := checkpoint.BucketInternals(s)
	return s, b, l
}

// TestNewStoreKVNeedsNamespaces: a store over a layout without namespaces
// refuses a KV rather than mixing its keys with the runs'.
func TestNewStoreKVNeedsNamespaces(t *testing.T) {
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	bs, err := checkpoint.OpenBucketStore(context.Background(), bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	_, l, _ := checkpoint.BucketInternals(bs)
	s := checkpoint.NewStore(checkpoint.NewBucketBackend(bucket), l, "test store")
	defer storetest.CloseStore(t, s)
	if _, err := s.KV("plans"); err == nil || !strings.Contains(err.Error(), "test store keeps no namespaces") {
		t.Fatalf("KV = %v", err)
	}
	if _, err := s.KV("a/b"); err == nil {
		t.Fatal("a namespace with a separator was accepted")
	}
}
