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

// TestBackends holds the bucket backend to the contract the store relies
// on, over a bucket in memory and one in files.
func TestBackends(t *testing.T) {
	bucket := func(t *testing.T, b *blob.Bucket) checkpoint.Backend {
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		})
		return checkpoint.NewBucketBackend(b)
	}
	t.Run("memblob", func(t *testing.T) {
		storetest.Backend(t, func(t *testing.T) checkpoint.Backend { return bucket(t, memblob.OpenBucket(nil)) })
	})
	t.Run("fileblob", func(t *testing.T) {
		storetest.Backend(t, func(t *testing.T) checkpoint.Backend {
			b, err := fileblob.OpenBucket(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return bucket(t, b)
		})
	})
}

// TestOldLayout writes states under keys spelled out as the bucket store
// wrote them before the backends were split out, and reads them through the
// store: states saved by an older sluice must stay resumable.
func TestOldLayout(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	s, err := checkpoint.OpenBucketStore(ctx, bucket, "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, s)
	storetest.OldLayout(t, s, func(step int64, rank int, value []byte) {
		key := "ckpt/r/0000000000000000000" + string(rune('0'+step)) + "/rank-" + string(rune('0'+rank)) + ".state"
		if err := bucket.WriteAll(ctx, key, value, nil); err != nil {
			t.Fatal(err)
		}
		if rank1, ok := strings.CutSuffix(key, "rank-1.state"); ok {
			if err := bucket.WriteAll(ctx, rank1+"COMPLETE", []byte("2\n"), nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}
