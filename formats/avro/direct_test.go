package avro_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
)

// The columns the driver decodes straight into their arrays (longs,
// doubles, strings, and unions of null and one of them, either branch
// first), with nulls at the first and last rows of blocks and of batches,
// a block of nulls only and empty strings: every value against twmb/avro's
// reading, through the builders and the direct columns alike (readRows),
// whole and in ranges that start and end inside blocks.
func TestDirectColumns(t *testing.T) {
	const schema = `{"type": "record", "name": "flat", "fields": [
		{"name": "id", "type": "long"},
		{"name": "nl", "type": ["null", "long"]},
		{"name": "nd", "type": ["double", "null"]},
		{"name": "ns", "type": ["null", "string"]},
		{"name": "s", "type": "string"},
		{"name": "d", "type": "double"}]}`
	const n, block = 2000, 97
	rng := rand.New(rand.NewPCG(5, 6))
	rows := make([]map[string]any, n)
	for i := range rows {
		id := int64(i)
		null := i%block == 0 || i%block == block-1 || i%7 == 3 || (i >= 3*block && i < 4*block)
		row := map[string]any{"id": id, "s": fmt.Sprint("v", rng.IntN(1000), "xyz")[:rng.IntN(4)], "d": rng.NormFloat64()}
		if null {
			row["nl"], row["nd"], row["ns"] = nil, nil, nil
		} else {
			row["nl"], row["nd"], row["ns"] = rng.Int64()-rng.Int64(), rng.NormFloat64()*1e300, fmt.Sprintf("é%d€", rng.IntN(100000))
		}
		rows[i] = row
	}
	for name, codec := range map[string]ocf.WriterOpt{"null": nil, "snappy": ocf.WithCodec(ocf.SnappyCodec())} {
		t.Run(name, func(t *testing.T) {
			opts := []ocf.WriterOpt{ocf.WithBlockCount(block)}
			if codec != nil {
				opts = append(opts, codec)
			}
			path := writeOCF(t, t.TempDir(), "flat.avro", schema, rows, opts...)
			want := reference(t, path)
			ds := plan(t, avro.Format{UnitBytes: 8 << 10}, formats.PlanOptions{}, path)
			for _, batch := range []int{1, 96, 97, 98, 4096} {
				sameRows(t, fmt.Sprintf("whole, batches of %d", batch), readRows(t, ds, 0, 0, n, batch), want)
			}
			for range 10 {
				lo := rng.Int64N(n)
				hi := lo + rng.Int64N(n-lo+1)
				sameRows(t, fmt.Sprintf("rows [%d, %d)", lo, hi), readRows(t, ds, 0, lo, hi, 1+rng.IntN(200)), want[lo:hi])
			}
		})
	}
}
