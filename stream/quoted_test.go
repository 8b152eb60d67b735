package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats/text"
)

// Quoted line ends past the sample, at range cuts, in a file cut into many
// small ranges: every row exactly once, the same split sequences at every
// world size, no row taken from inside a quoted field.
func TestTextQuotedLineEndsPastSample(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,label\n")
	for i := range 1200 {
		if i%40 == 39 {
			// Lines inside the field read as records of their own.
			fmt.Fprintf(&b, "%d,\"%d\n900000,1\n900001,2\"\n", i, i%10)
			continue
		}
		fmt.Fprintf(&b, "%d,%d\n", i, i%10)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var reference map[int][]int64
	for _, world := range []int{1, 2, 4} {
		got := map[int][]int64{}
		var ids []int64
		for rank := range world {
			o := textOptions(t, dir, false)
			o.Formats = text.All(text.Options{UnitBytes: 100, SampleRecords: 20, WidenToString: true})
			o.Columns = []string{"id"}
			o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 4, world, rank
			o.ChunkBytes = 100 // a chunk a range: every cut is one a reader starts at
			bs, _ := consume(t, open(t, o), -1)
			bySplit(bs, got)
			ids = append(ids, allIDs(bs)...)
		}
		exactlyOnce(t, ids, 1200)
		if reference == nil {
			reference = got
			continue
		}
		for s := range 4 {
			if !slices.Equal(reference[s], got[s]) {
				t.Fatalf("world %d: split %d differs from world 1", world, s)
			}
		}
	}
}
