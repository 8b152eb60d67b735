package stream

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/faults"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/storage"
)

// pinnedRows and pinnedUnit size the files of the tests of pinned reads:
// ids of six digits, so that a rewrite with others is the same size, in
// many units, so that an epoch reads the file in many requests.
const (
	pinnedRows  = 3000
	pinnedUnit  = 100
	pinnedFirst = 100_000 // the ids planned
	pinnedOther = 200_000 // the ids of the rewrite
)

// pinnedVersions returns a file of format with the ids planned and the
// same file with the other ids: the same size, other values.
func pinnedVersions(t testing.TB, format string) (planned, rewrite []byte) {
	t.Helper()
	cols := vc.Pick("id", "tag")
	planned, err := vc.Encode(format, cols, pinnedFirst, pinnedRows, pinnedUnit)
	if err != nil {
		t.Fatal(err)
	}
	rewrite, err = vc.Encode(format, cols, pinnedOther, pinnedRows, pinnedUnit)
	if err != nil {
		t.Fatal(err)
	}
	if len(planned) != len(rewrite) || bytes.Equal(planned, rewrite) {
		t.Fatalf("%s: versions of %d and %d bytes: want two of one size", format, len(planned), len(rewrite))
	}
	return planned, rewrite
}

// pinnedOptions read one file of format a window at a time, as little
// ahead as the stream allows.
func pinnedOptions(t *testing.T, format, url string) Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	to := text.Options{UnitBytes: 2 << 10}
	return Options{
		URLs:          []string{url},
		Formats:       []formats.Format{parquet.Format{}, orc.Format{}, avro.Format{}, text.New(text.CSV, to), text.New(text.JSONLines, to)},
		Columns:       []string{"id", "tag"},
		BatchSize:     50,
		ShuffleWindow: pinnedUnit,
		ChunkBytes:    1 << 10,
		Limits:        Limits{FetchConcurrency: 1, ReadConcurrency: 1, PrefetchWindows: 1, PrefetchBatches: 1},
		Allocator:     mem,
	}
}

// TestRewrittenFileIsAnError: a file rewritten at the same size after the
// dataset was planned, before the epoch or in its middle, ends the epoch
// with an error wrapping storage.ErrChanged that names the file, and no row
// of the new version is delivered: every value read is of the version
// planned.
func TestRewrittenFileIsAnError(t *testing.T) {
	for _, format := range vc.Formats {
		for _, when := range []string{"before", "during"} {
			t.Run(format+"/"+when, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "part."+format)
				planned, rewrite := pinnedVersions(t, format)
				if err := os.WriteFile(path, planned, 0o644); err != nil {
					t.Fatal(err)
				}
				ds := open(t, pinnedOptions(t, format, path))
				if when == "before" {
					if err := faults.RewriteFile(path, rewrite); err != nil {
						t.Fatal(err)
					}
				}
				batches, err := pinnedEpoch(t, ds, func(batch int) {
					if when == "during" && batch == 2 {
						if err := faults.RewriteFile(path, rewrite); err != nil {
							t.Fatal(err)
						}
					}
				})
				if when == "during" && batches < 2 {
					t.Fatalf("%d batches before the error %v", batches, err)
				}
				checkChanged(t, err, path)
			})
		}
	}
}

// pinnedEpoch takes an epoch's batches, checking every value and that each
// id is of the version planned, calling after with the number of batches
// taken after each; it returns that number and the error that ended the
// epoch.
func pinnedEpoch(t *testing.T, ds *Dataset, after func(batch int)) (int, error) {
	t.Helper()
	n := 0
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			return n, err
		}
		if _, err := vc.Batch(b, nil); err != nil {
			t.Fatal(err)
		}
		for _, id := range b.Column(0).(*array.Int64).Int64Values() {
			if id < pinnedFirst || id >= pinnedFirst+pinnedRows {
				t.Fatalf("batch %d: id %d, of the file's new version", n, id)
			}
		}
		n++
		after(n)
	}
	return n, nil
}

func checkChanged(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, storage.ErrChanged) {
		t.Fatalf("the epoch ended with %v, want storage.ErrChanged", err)
	}
	if errors.Is(err, formats.ErrCorrupt) {
		t.Errorf("a rewritten file called corrupt: %v", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "planned") {
		t.Errorf("error %q does not name %s and the version planned", err, path)
	}
}

// TestResumeAfterRewriteIsRefused: a state taken before a file was
// rewritten is refused by a dataset planned after: where the rewrite moved
// the plan, by its fingerprint, saying what the plan covers; with a
// PlanStore, at Open, naming the file, also where the rewrite kept its size.
func TestResumeAfterRewriteIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csv")
	planned, sameSize := pinnedVersions(t, "csv")
	grown, err := vc.Encode("csv", vc.Pick("id", "tag"), pinnedFirst, pinnedRows+10, pinnedUnit)
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []bool{false, true} {
		if err := os.WriteFile(path, planned, 0o644); err != nil {
			t.Fatal(err)
		}
		o := pinnedOptions(t, "csv", path)
		if store {
			o.PlanStore = &PlanStore{Bucket: memblob.OpenBucket(nil), Key: "plan.json"}
			defer o.PlanStore.Bucket.Close()
		}
		_, st := consume(t, open(t, o), 3)
		rewrite := grown
		if store {
			rewrite = sameSize
		}
		if err := faults.RewriteFile(path, rewrite); err != nil {
			t.Fatal(err)
		}
		ds, err := Open(context.Background(), o)
		if store {
			if !errors.Is(err, ErrPlanMismatch) || !strings.Contains(err.Error(), "file file://"+path) || !strings.Contains(err.Error(), "in the plan") {
				t.Fatalf("with a PlanStore: Open after a same-size rewrite: %v, want ErrPlanMismatch naming the file", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		err = ds.LoadStateDict(st)
		ds.Close()
		if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "field plan") || !strings.Contains(err.Error(), "a file was added, removed or rewritten") {
			t.Fatalf("a state taken before a rewrite: %v, want a mismatch of the plan saying what it covers", err)
		}
	}
}
