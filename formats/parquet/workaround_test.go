package parquet_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats"
)

// readFile reads every row of the local Parquet file at path, one array per
// column, and checks that no Arrow memory is left outstanding afterwards.
func readFile(t *testing.T, path string) (*formats.Dataset, []arrow.Array) {
	t.Helper()
	ctx := context.Background()
	ds, err := planParquet(ctx, []string{path}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	if len(ds.Fragments) != 1 {
		t.Fatalf("%d fragments", len(ds.Fragments))
	}
	cols, err := readColumns(ctx, ds, 0, 0, ds.Fragments[0].Rows, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release(cols)
		mem.AssertSize(t, 0)
	})
	return ds, cols
}

// A DATA_PAGE_V2 of nulls only whose empty values section is stored as zero
// bytes under Snappy: arrow-go's Snappy refuses the empty block.
func TestEmptySnappyPage(t *testing.T) {
	_, cols := readFile(t, filepath.Join(sharedTestdata, "parquet-testing/data/datapage_v2_empty_datapage.snappy.parquet"))
	if len(cols) != 1 || cols[0].Len() != 1 || cols[0].NullN() != 1 {
		t.Fatalf("want one null row, got %v", cols)
	}
	// Only the empty block is read differently: damaged blocks still fail.
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := compress.Decode(c, nil, nil); err != nil || len(out) != 0 {
		t.Errorf("empty block: %q, %v", out, err)
	}
	if _, err := compress.Decode(c, nil, []byte{0x05, 0xff}); err == nil {
		t.Error("a damaged block decoded")
	}
	enc := c.Encode(nil, []byte("sluice"))
	if out, err := compress.Decode(c, nil, enc); err != nil || string(out) != "sluice" {
		t.Errorf("round trip: %q, %v", out, err)
	}
}
