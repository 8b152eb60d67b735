package stream

import (
	"testing"

	"github.com/sluicedata/sluice/internal/synth"
)

// Row groups of 100,000 rows read through windows of 4096: with a page
// index each is cut into chunks of at most a window's rows (places), so
// that no window holds a row group whole, and every row still comes once
// at every world size. Read in storage order, a rank's consecutive places
// of a row group are fetched in joined requests, so the pages at their
// cuts are fetched about once; shuffled, each place is fetched on its own
// and the pages at its cuts twice. Without a page index the row groups
// are read whole, as before.
func TestCutRowGroups(t *testing.T) {
	const window = 4096
	for _, paged := range []bool{true, false} {
		spec := synth.Spec{Files: 2, RowsPerFile: 200000, RowGroupRows: 100000, Seed: 5, PageIndex: paged, SmallPages: !paged}
		dir := writeDataset(t, spec)
		for _, shuffle := range []bool{false, true} {
			for _, world := range []int{1, 2} {
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
						for _, c := range ds.Chunks() {
							if cut := c.Rows() < int64(spec.RowGroupRows); cut != paged || (paged && c.Rows() > window) {
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
				if paged && !shuffle && amp > 1.05 {
					t.Errorf("page index, in storage order, world %d: io_amplification %.4f, want at most 1.05: consecutive places should share their pages", world, amp)
				}
			}
		}
	}
}
