package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats/text"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
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
	vc.Elastic(t, 4, []int{1, 2, 4}, vc.IDs(1200), func(world, rank int) map[int][]int64 {
		o := textOptions(t, dir, false)
		o.Formats = text.All(text.Options{UnitBytes: 100, SampleRecords: 20, WidenToString: true})
		o.Columns = []string{"id"}
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 4, world, rank
		o.ChunkBytes = 100 // a chunk a range: every cut is one a reader starts at
		return bySplit(first(consume(t, open(t, o), -1)), nil)
	})
}
