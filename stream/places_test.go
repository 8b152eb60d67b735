package stream

import (
	"slices"
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

// In storage order a paged row group is read in pieces of up to twice the
// window. A state taken by a build that read it a window at a time counts
// those windows: it resumes at the same row, and the epoch ends with every
// row once, in storage order.
func TestStorageOrderResumesAStateOfHalfPieces(t *testing.T) {
	const window, rowGroup = 4096, 100000
	spec := synth.Spec{Files: 2, RowsPerFile: rowGroup, RowGroupRows: rowGroup, Seed: 5, PageIndex: true}
	dir := writeDataset(t, spec)
	o := checkedOptions(t, dir)
	o.Columns = []string{"id", "x"}
	o.BatchSize, o.ShuffleWindow, o.NumSplits = 1000, window, 1
	first, st := consume(t, open(t, o), 9)
	c := st.Cursors[0]
	if c.Rows != 9000 || c.Window != 1 {
		t.Fatalf("cursor %+v after 9,000 rows, want it in the second window of about 7,692 rows", c)
	}
	// The old cursor: windows of 4,000 rows (the row group cut in 25).
	old := st.Clone()
	old.Cursors[0].Window, old.Cursors[0].Offset = 2, 1000
	ds := open(t, o)
	if err := ds.LoadStateDict(old); err != nil {
		t.Fatalf("a state of the old pieces: %v", err)
	}
	rest, _ := consume(t, ds, -1)
	ids := append(allIDs(first), allIDs(rest)...)
	if !slices.IsSorted(ids) {
		t.Fatalf("storage order resumed out of order")
	}
	exactlyOnce(t, ids, int64(spec.Files*spec.RowsPerFile))
	// A cursor of neither layout is still refused.
	bad := st.Clone()
	bad.Cursors[0].Window, bad.Cursors[0].Offset = 3, 1000
	if err := open(t, o).LoadStateDict(bad); err == nil {
		t.Fatal("a cursor of no layout was accepted")
	}
}
