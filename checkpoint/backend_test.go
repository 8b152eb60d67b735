package checkpoint

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
)

// backendKits open a fresh, empty backend of each kind for a test. The
// pebble one is a store's, so that its cleanup (Close) fails if a listing
// left an iterator open.
func backendKits() []struct {
	name string
	open func(t *testing.T) backend
} {
	bucket := func(t *testing.T, b *blob.Bucket) backend {
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		})
		return bucketBackend{b}
	}
	return []struct {
		name string
		open func(t *testing.T) backend
	}{
		{"pebble", func(t *testing.T) backend {
			s, err := OpenPebble(t.TempDir(), PebbleOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeStore(t, s) })
			return s.b
		}},
		{"memblob", func(t *testing.T) backend { return bucket(t, memblob.OpenBucket(nil)) }},
		{"fileblob", func(t *testing.T) backend {
			b, err := fileblob.OpenBucket(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return bucket(t, b)
		}},
	}
}

func collect(t *testing.T, b backend, prefix, delim string) []string {
	t.Helper()
	var keys []string
	for k, err := range b.list(context.Background(), prefix, delim) {
		if err != nil {
			t.Fatalf("list %q %q: %v", prefix, delim, err)
		}
		keys = append(keys, k)
	}
	return keys
}

// TestBackends holds every backend to the contract the store relies on.
func TestBackends(t *testing.T) {
	ctx := context.Background()
	for _, kit := range backendKits() {
		t.Run(kit.name, func(t *testing.T) {
			t.Run("GetPut", func(t *testing.T) {
				b := kit.open(t)
				if _, err := b.get(ctx, "a/x"); !errors.Is(err, errNoKey) {
					t.Fatalf("get of a missing key: %v", err)
				}
				v := []byte("one")
				if err := b.put(ctx, "a/x", v); err != nil {
					t.Fatal(err)
				}
				v[0] = 'X' // the caller may reuse what it put
				got, err := b.get(ctx, "a/x")
				if err != nil || string(got) != "one" {
					t.Fatalf("get = %q, %v", got, err)
				}
				got[0] = 'Y' // and what it got
				if err := b.put(ctx, "a/x", []byte("two")); err != nil {
					t.Fatal(err)
				}
				if got, err := b.get(ctx, "a/x"); err != nil || string(got) != "two" {
					t.Fatalf("get after overwrite = %q, %v", got, err)
				}
				if err := b.put(ctx, "a/empty", nil); err != nil {
					t.Fatal(err)
				}
				if got, err := b.get(ctx, "a/empty"); err != nil || len(got) != 0 {
					t.Fatalf("get of an empty value = %q, %v", got, err)
				}
			})
			t.Run("Delete", func(t *testing.T) {
				b := kit.open(t)
				for _, k := range []string{"d/1", "d/2", "d/3"} {
					if err := b.put(ctx, k, []byte(k)); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.delete(ctx, []string{"d/3", "d/missing", "d/1"}); err != nil {
					t.Fatal(err)
				}
				if err := b.delete(ctx, nil); err != nil {
					t.Fatal(err)
				}
				if got := collect(t, b, "d/", ""); !slices.Equal(got, []string{"d/2"}) {
					t.Fatalf("after delete: %q", got)
				}
				if _, err := b.get(ctx, "d/1"); !errors.Is(err, errNoKey) {
					t.Fatalf("get of a deleted key: %v", err)
				}
			})
			t.Run("List", func(t *testing.T) {
				b := kit.open(t)
				for _, k := range []string{"p/c", "p/b/2", "q", "p/a", "p/b/1", "pz", "p/d/e/f"} {
					if err := b.put(ctx, k, []byte("v")); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range []struct {
					prefix, delim string
					want          []string
				}{
					{"p/", "", []string{"p/a", "p/b/1", "p/b/2", "p/c", "p/d/e/f"}},
					{"p/", "/", []string{"p/a", "p/b/", "p/c", "p/d/"}},
					{"", "/", []string{"p/", "pz", "q"}},
					{"p/b/", "/", []string{"p/b/1", "p/b/2"}},
					{"p", "", []string{"p/a", "p/b/1", "p/b/2", "p/c", "p/d/e/f", "pz"}},
					{"r/", "/", nil},
				} {
					if got := collect(t, b, c.prefix, c.delim); !reflect.DeepEqual(got, c.want) {
						t.Errorf("list %q delim %q = %q, want %q", c.prefix, c.delim, got, c.want)
					}
				}
				// Stopping early releases what the listing held.
				for range b.list(ctx, "p/", "") {
					break
				}
				cancelled, cancel := context.WithCancel(ctx)
				cancel()
				var last error
				for _, err := range b.list(cancelled, "p/", "") {
					last = err
				}
				if !errors.Is(last, context.Canceled) {
					t.Fatalf("list with a cancelled context ended with %v", last)
				}
			})
		})
	}
}

// TestOldLayouts writes states under keys spelled out as the stores before
// the backends were split out wrote them, and reads them through the
// stores: states saved by an older sluice must stay resumable.
func TestOldLayouts(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, s Store, put func(key string, value []byte)) {
		t.Helper()
		for step := range int64(2) {
			for rank := range 2 {
				st := testState(rank, 2, 4)
				st.Epoch = step
				enc, err := Encode(st)
				if err != nil {
					t.Fatal(err)
				}
				put(oldKey(t, s, step, rank), enc)
			}
		}
		if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
			t.Fatalf("Latest = %d, %v", latest, err)
		}
		merged, err := s.LoadStep(ctx, "r", 1)
		if err != nil || merged.Epoch != 1 || merged.WorldSize != 2 {
			t.Fatalf("LoadStep = %+v, %v", merged, err)
		}
		if st, err := s.Load(ctx, "r", 0, 1); err != nil || st.Rank != 1 || st.Epoch != 0 {
			t.Fatalf("Load = %+v, %v", st, err)
		}
		if steps, complete := listSteps(t, s, "r"); !slices.Equal(steps, []int64{0, 1}) || !slices.Equal(complete, []bool{true, true}) {
			t.Fatalf("List: steps %v complete %v", steps, complete)
		}
	}
	t.Run("pebble", func(t *testing.T) {
		s, err := OpenPebble(t.TempDir(), PebbleOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer closeStore(t, s)
		db := s.b.(*pebbleBackend).db
		check(t, s, func(key string, value []byte) {
			if err := db.Set([]byte(key), value, nil); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("bucket", func(t *testing.T) {
		bucket := memblob.OpenBucket(nil)
		defer bucket.Close()
		s, err := OpenBucketStore(ctx, bucket, "ckpt")
		if err != nil {
			t.Fatal(err)
		}
		defer closeStore(t, s)
		check(t, s, func(key string, value []byte) {
			if err := bucket.WriteAll(ctx, key, value, nil); err != nil {
				t.Fatal(err)
			}
			if rank1, ok := strings.CutSuffix(key, "rank-1.state"); ok {
				if err := bucket.WriteAll(ctx, rank1+"COMPLETE", []byte("2\n"), nil); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
}

// oldKey is the key of run "r" as the older stores spelled it.
func oldKey(t *testing.T, s Store, step int64, rank int) string {
	t.Helper()
	switch s.(type) {
	case *PebbleStore:
		// "c\x00" run "\x00", step as 8 bytes and rank as 4, big-endian.
		return "c\x00r\x00" + string([]byte{0, 0, 0, 0, 0, 0, 0, byte(step)}) + string([]byte{0, 0, 0, byte(rank)})
	case *BucketStore:
		return "ckpt/r/0000000000000000000" + string(rune('0'+step)) + "/rank-" + string(rune('0'+rank)) + ".state"
	}
	t.Fatalf("no old layout for %T", s)
	return ""
}
