package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/scratch"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

func TestS3Pinned(t *testing.T)    { testPinned(t, scratch.S3, "ETag") }
func TestGCSPinned(t *testing.T)   { testPinned(t, scratch.GCS, "generation") }
func TestAzurePinned(t *testing.T) { testPinned(t, scratch.Azure, "ETag") }

// The ids of the version planned and of the rewrite: six digits each, so
// that the two files are the same size.
const pinnedRows, pinnedFirst, pinnedOther = 3000, 100_000, 200_000

// testPinned: an object of each format overwritten at the same size after
// the dataset was planned, before the epoch or in its middle, ends the
// epoch with storage.ErrChanged naming the object and both versions, and no
// row of the new version is delivered. The object is named itself (its
// version from a HEAD) before the epoch, and by its folder (from a listing)
// in its middle.
func testPinned(t *testing.T, be scratch.Backend, version string) {
	sc := newScratch(t, be)
	ctx := context.Background()
	cols := vc.Pick("id", "tag")
	for _, format := range vc.Formats {
		planned, err := vc.Encode(format, cols, pinnedFirst, pinnedRows, 100)
		if err != nil {
			t.Fatal(err)
		}
		rewrite, err := vc.Encode(format, cols, pinnedOther, pinnedRows, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(planned) != len(rewrite) || bytes.Equal(planned, rewrite) {
			t.Fatalf("%s: versions of %d and %d bytes: want two of one size", format, len(planned), len(rewrite))
		}
		for _, when := range []string{"before", "during"} {
			t.Run(format+"/"+when, func(t *testing.T) {
				dir := "pinned-" + format + "-" + when + "/"
				key := sc.Key + dir + "part." + format
				if err := sc.Bucket.WriteAll(ctx, key, planned, nil); err != nil {
					t.Fatal(err)
				}
				url := sc.URL(dir + "part." + format)
				if when == "during" {
					url = sc.URL(dir)
				}
				ds, err := stream.Open(ctx, pinnedOptions(t, url))
				if err != nil {
					t.Fatalf("%s: open: %v", be.Name, err)
				}
				defer ds.Close()
				if when == "before" {
					if err := sc.Bucket.WriteAll(ctx, key, rewrite, nil); err != nil {
						t.Fatal(err)
					}
				}
				taken := 0
				for b, err := range ds.Batches(ctx) {
					if err != nil {
						checkChanged(t, be, err, "/"+dir+"part."+format, version)
						break
					}
					if _, err := vc.Batch(b, nil); err != nil {
						t.Fatal(err)
					}
					for _, id := range b.Column(0).(*array.Int64).Int64Values() {
						if id < pinnedFirst || id >= pinnedFirst+pinnedRows {
							t.Fatalf("%s: batch %d: id %d, of the object's new version", be.Name, taken, id)
						}
					}
					if taken++; taken == 2 && when == "during" {
						if err := sc.Bucket.WriteAll(ctx, key, rewrite, nil); err != nil {
							t.Fatal(err)
						}
					}
					if taken == pinnedRows/50 {
						t.Fatalf("%s: the epoch ended without an error", be.Name)
					}
				}
			})
		}
	}
}

func pinnedOptions(t *testing.T, url string) stream.Options {
	to := text.Options{UnitBytes: 2 << 10}
	return stream.Options{
		URLs:          []string{url},
		Formats:       []formats.Format{parquet.Format{}, orc.Format{}, avro.Format{}, text.New(text.CSV, to), text.New(text.JSONLines, to)},
		Columns:       []string{"id", "tag"},
		BatchSize:     50,
		ShuffleWindow: 100,
		ChunkBytes:    1 << 10,
		Limits:        stream.Limits{FetchConcurrency: 1, ReadConcurrency: 1, PrefetchWindows: 1, PrefetchBatches: 1},
		Allocator:     checkedAllocator(t),
	}
}

// checkChanged: err wraps storage.ErrChanged, and says which object, what
// version was planned and which was found.
func checkChanged(t *testing.T, be scratch.Backend, err error, object, version string) {
	t.Helper()
	var ce *storage.ChangedError
	if !errors.Is(err, storage.ErrChanged) || !errors.As(err, &ce) {
		t.Fatalf("%s: the epoch ended with %v, want a storage.ChangedError", be.Name, err)
	}
	if errors.Is(err, formats.ErrCorrupt) {
		t.Errorf("%s: a rewritten object called corrupt: %v", be.Name, err)
	}
	if ce.Planned.Version == "" || ce.Found.Version == "" || ce.Planned.Version == ce.Found.Version {
		t.Errorf("%s: planned %+v, found %+v: want two versions", be.Name, ce.Planned, ce.Found)
	}
	for _, s := range []string{object, version + " " + ce.Planned.Version + " planned", ce.Found.Version + " found"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not say %q", be.Name, err, s)
		}
	}
}
