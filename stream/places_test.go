package stream

import (
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// Row groups of 100,000 rows read through windows of 4096: with a page
// index windows take them 4096 rows at a time, so that no window holds a
// row group whole, and every row still comes once at every world size. A
// rank's consecutive windows of a row group are fetched in joined
// requests, so the pages at their cuts are fetched about once, in storage
// order or shuffled. Without a page index, in pages of about 8 KiB that
// the footer counts, the same holds: their pages are found by walking their
// headers, a request each (1.02 against 1.01 here).
func TestCutRowGroups(t *testing.T) {
	const window = 4096
	// Under -short (the race pass) one row group a file, and two of the
	// four ways to read them: the read in order at one rank, shuffled at
	// two.
	type way struct {
		shuffle bool
		world   int
	}
	ways := sample.Spread([]way{{false, 1}, {false, 2}, {true, 1}, {true, 2}}, 2)
	for _, paged := range []bool{true, false} {
		spec := synth.Spec{Files: 2, RowsPerFile: sample.Count(200000, 100000), RowGroupRows: 100000, Seed: 5, PageIndex: paged, SmallPages: !paged}
		dir := writeDataset(t, spec)
		for _, w := range ways {
			shuffle, world := w.shuffle, w.world
			var read, stored int64
			var ids []int64
			for rank := range world {
				log := &readLog{}
				o := checkedOptions(t, dir)
				o.Columns = []string{"id", "x", "s"}
				o.NumSplits, o.WorldSize, o.Rank = 8, world, rank
				o.Shuffle, o.ShuffleWindow = shuffle, window
				o.Storage.Wrap = log.wrap
				ds := open(t, o)
				if rank == 0 {
					for _, f := range ds.Files() {
						for _, u := range f.Units {
							stored += u.Bytes
						}
					}
					// Row groups of 3 MB are less than PlaceBytes:
					// whole chunks, which windows take 4096 rows at a
					// time: paged, by the index or by a walk.
					for _, c := range ds.Chunks() {
						if c.Rows() != int64(spec.RowGroupRows) || !c.Paged {
							t.Fatalf("page index %t: chunk %+v of a row group of %d rows, window %d", paged, c, spec.RowGroupRows, window)
						}
					}
				}
				log.start()
				bs, _ := consume(t, ds, -1)
				ids = append(ids, allIDs(bs)...)
				read += log.bytes()
			}
			exactlyOnce(t, ids, int64(spec.Files*spec.RowsPerFile))
			amp := float64(read) / float64(stored)
			t.Logf("page index %t, shuffle %t, world %d: io_amplification %.4f", paged, shuffle, world, amp)
			if amp > 1.05 {
				t.Errorf("page index %t, shuffle %t, world %d: io_amplification %.4f, want at most 1.05: consecutive windows of a row group should share their pages", paged, shuffle, world, amp)
			}
		}
	}
}
