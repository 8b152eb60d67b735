package parquet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats"
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

// A decode the reader waits for spreads its columns even when other
// decodes hold every core, and makes the same batches; one it does not
// wait for decodes on its own goroutine then.
func TestSpreadWaited(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer parquet.HoldDecodes(64)()
	path := filepath.Join(t.TempDir(), "waited.parquet")
	writeGenerated(t, path, genColumns(), pq.Encodings.Plain, compress.Codecs.Snappy, 1, false, 4000)
	bg := context.Background()
	serial, _, err := readFormatRange(bg, path, parquet.Format{SerialColumns: true}, 1<<20, 0, 4000)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseBatches(serial)
	for _, waited := range []bool{false, true} {
		before := parquet.SpreadBatches()
		ctx := formats.WithWaited(bg, func() bool { return waited })
		got, _, err := readFormatRange(ctx, path, parquet.Format{}, 1<<20, 0, 4000)
		if err != nil {
			t.Fatalf("waited %v: %v", waited, err)
		}
		if err := sameBatches(got, serial); err != nil {
			t.Errorf("waited %v: %v", waited, err)
		}
		releaseBatches(got)
		if spread := parquet.SpreadBatches() > before; spread != waited {
			t.Errorf("waited %v: columns spread %v, want %v", waited, spread, waited)
		}
	}
}
