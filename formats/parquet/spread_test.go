package parquet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats/parquet"
)

// A batch's columns decoded on idle cores make the batches of one
// goroutine, whole and cut, in every encoding; goleak (TestMain) checks
// that no goroutine outlives the read.
func TestSpreadColumns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	dir := t.TempDir()
	all := genColumns()
	before := parquet.SpreadBatches()
	defer func() {
		if parquet.SpreadBatches() == before {
			t.Error("no batch was decoded on more than one goroutine")
		}
	}()
	for _, enc := range []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.DeltaBinaryPacked, pq.Encodings.DeltaLengthByteArray} {
		var cols []genColumn
		for _, c := range all {
			for _, e := range c.encs {
				if e == enc {
					cols = append(cols, c)
				}
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("spread_%s.parquet", enc))
		writeGenerated(t, path, cols, enc, compress.Codecs.Snappy, 1, false, 4000)
		for _, cut := range [][2]int64{{0, 4000}, {100, 3950}, {1600, 2990}} {
			ctx := context.Background()
			spread, smem, serr := readFormatRange(ctx, path, parquet.Format{}, 1<<20, cut[0], cut[1])
			serial, _, err := readFormatRange(ctx, path, parquet.Format{SerialColumns: true}, 1<<20, cut[0], cut[1])
			if serr != nil || err != nil {
				t.Fatalf("%s %v: spread: %v; serial: %v", enc, cut, serr, err)
			}
			if err := sameBatches(spread, serial); err != nil {
				t.Errorf("%s %v: %v", enc, cut, err)
			}
			releaseBatches(spread)
			releaseBatches(serial)
			if n := smem.CurrentAlloc(); n != 0 && enc != pq.Encodings.DeltaBinaryPacked && enc != pq.Encodings.DeltaLengthByteArray {
				t.Errorf("%s %v: %d bytes outstanding", enc, cut, n)
			}
		}
	}
}
