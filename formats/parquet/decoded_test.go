package parquet_test

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// Unit.Decoded counts fixed-width columns exactly from their Arrow types
// and a string column by its chunks' uncompressed size, which for
// plain-encoded strings is their bytes and a 4-byte length each: Arrow's
// data and offsets.
func TestUnitDecoded(t *testing.T) {
	// Strings of 2,000 bytes: no dictionary holds many, so they are
	// written plain, as large values are.
	spec := synth.Spec{Files: 1, RowsPerFile: 3000, RowGroupRows: 1000, StringBytes: 2000, Seed: 1}
	dir := writeSynth(t, spec)
	for _, tc := range []struct {
		cols   []string
		lo, hi int64 // per row
	}{
		{[]string{"id", "x"}, 16, 16},
		{[]string{"id", "label", "s"}, 16 + 2004, (16 + 2004) * 11 / 10},
	} {
		scan, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{Columns: tc.cols})
		if err != nil {
			t.Fatal(err)
		}
		for i, u := range scan.Fragments[0].Units {
			if u.Decoded < tc.lo*u.Rows || u.Decoded > tc.hi*u.Rows {
				t.Errorf("%v: row group %d of %d rows: Decoded %d, want %d to %d", tc.cols, i, u.Rows, u.Decoded, tc.lo*u.Rows, tc.hi*u.Rows)
			}
		}
		scan.Close()
	}
}
