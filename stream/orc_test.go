package stream

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

// The stream's guarantees over ORC files: stripes are units with exact
// counts, and splits cut stripes, which reads start at row groups.

// writeORCDataset writes files of the given row counts of the value
// harness's data (internal/testkit/valuecheck: id, i32 and text, every value a
// function of the id) in stripes of 700 rows and row groups of 96, ids
// numbering all rows in order, and returns the directory and the row count.
func writeORCDataset(t testing.TB, sizes []int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	var id int64
	for i, n := range sizes {
		err := vc.WriteORC(filepath.Join(dir, fmt.Sprintf("part-%02d.orc", i)), vc.Pick(orcColumns...), id, int64(n),
			orcwrite.Options{StripeRows: 700, RowIndexStride: 96, Compression: orcwrite.Zlib, BlockSize: 2 << 10})
		if err != nil {
			t.Fatal(err)
		}
		id += int64(n)
	}
	return dir, id
}

var orcColumns = []string{"id", "i32", "text"}

var orcSizes = []int{0, 2500, 701, 1, 3100, 64}

func orcOptions(t testing.TB, dir string) Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return Options{
		URLs:          []string{dir},
		Formats:       []formats.Format{orc.Format{}},
		Columns:       orcColumns,
		BatchSize:     64,
		ShuffleWindow: 500,
		ChunkBytes:    2 << 10,
		Seed:          42,
		Allocator:     mem,
	}
}

// Every row exactly once across ranks; every split the same rows in the
// same order at every world size.
func TestORCExactlyOnceAndElastic(t *testing.T) {
	dir, total := writeORCDataset(t, orcSizes)
	for _, shuffle := range []bool{false, true} {
		for _, splits := range []int{4, 6} {
			t.Run(fmt.Sprintf("shuffle=%t/splits=%d", shuffle, splits), func(t *testing.T) {
				vc.Elastic(t, splits, []int{1, 2, splits}, vc.IDs(total), func(world, rank int) map[int][]int64 {
					o := orcOptions(t, dir)
					o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, splits, world, rank
					ds := open(t, o)
					if world == 1 {
						checkSplitRows(t, ds, false)
					}
					bs, _ := consume(t, ds, -1)
					fullBatches(t, bs, o.BatchSize)
					return bySplit(bs, nil)
				})
			})
		}
	}
}

// A state taken after any batch resumes exactly in a new dataset.
func TestORCResumeAnywhere(t *testing.T) {
	dir, _ := writeORCDataset(t, orcSizes)
	r := rand.New(rand.NewPCG(21, 22))
	for _, shuffle := range []bool{false, true} {
		o := orcOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 4, 2, 1
		full, _ := consume(t, open(t, o), -1)
		for range 5 {
			k := r.IntN(len(full) + 1)
			head, st := consume(t, open(t, o), k)
			second := open(t, o)
			if err := second.LoadStateDict(st); err != nil {
				t.Fatal(err)
			}
			tail, _ := consume(t, second, -1)
			got := append(head, tail...)
			if len(got) != len(full) {
				t.Fatalf("shuffle=%t resume at %d: %d batches, want %d", shuffle, k, len(got), len(full))
			}
			for i := range got {
				if got[i].split != full[i].split || !slices.Equal(got[i].ids, full[i].ids) {
					t.Fatalf("shuffle=%t resume at %d: batch %d differs", shuffle, k, i)
				}
			}
		}
	}
}

// States of all ranks merged resume at another world size: nothing lost,
// nothing repeated, each split's sequence the uninterrupted one.
func TestORCElasticResume(t *testing.T) {
	dir, total := writeORCDataset(t, orcSizes)
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%t", shuffle), func(t *testing.T) {
			base := orcOptions(t, dir)
			base.Shuffle, base.NumSplits = shuffle, 4
			all := resumeAcross(t, base, []int{4, 2, 1}, 6, rand.New(rand.NewPCG(23, 24)))
			exactlyOnce(t, all, total)
		})
	}
}
