package avro_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/formatstest"
)

// conformanceSchema is formatstest.Schema in Avro: every field a union
// with null.
const conformanceSchema = `{"type": "record", "name": "table", "fields": [
	{"name": "id", "type": ["null", "long"]},
	{"name": "f64", "type": ["null", "double"]},
	{"name": "s", "type": ["null", "string"]},
	{"name": "b", "type": ["null", "boolean"]},
	{"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]}
]}`

// writeConformance writes rec with twmb/avro's writer in blocks of a
// quarter of unitRows rows, deflated.
func writeConformance(w io.Writer, rec arrow.RecordBatch, unitRows int) error {
	ow, err := ocf.NewWriter(w, twmb.MustParse(conformanceSchema), ocf.WithBlockCount(max(unitRows/4, 1)), ocf.WithCodec(ocf.DeflateCodec(6)))
	if err != nil {
		return err
	}
	for r := range int(rec.NumRows()) {
		row := map[string]any{}
		for c, f := range rec.Schema().Fields() {
			row[f.Name] = avroValue(rec.Column(c), r)
		}
		if err := ow.Encode(row); err != nil {
			return err
		}
	}
	return ow.Close()
}

// avroValue is row r of col as twmb/avro encodes it.
func avroValue(col arrow.Array, r int) any {
	if col.IsNull(r) {
		return nil
	}
	switch c := col.(type) {
	case *array.Int64:
		return c.Value(r)
	case *array.Float64:
		return c.Value(r)
	case *array.String:
		return c.Value(r)
	case *array.Boolean:
		return c.Value(r)
	case *array.Date32:
		return time.Unix(int64(c.Value(r))*86400, 0).UTC()
	}
	panic(fmt.Sprintf("no Avro value for %s", col.DataType()))
}

func TestConformance(t *testing.T) {
	formatstest.Run(t, formatstest.Driver{
		Formats: []formats.Format{avro.Format{UnitBytes: 2 << 10}},
		Ext:     ".avro",
		Write:   writeConformance,
		Damages: []formatstest.Damage{
			// The sync marker ends the header and every block: the one
			// after the first block overwritten.
			{Name: "a sync marker overwritten", Apply: func(b []byte) []byte {
				sync := b[len(b)-16:]
				first := bytes.Index(b, sync) + 16
				at := first + bytes.Index(b[first:], sync)
				copy(b[at:at+16], bytes.Repeat([]byte{0xff}, 16))
				return b
			}},
			{Name: "a block's count overwritten", Apply: func(b []byte) []byte {
				sync := b[len(b)-16:]
				at := bytes.Index(b, sync) + 16
				b[at] = 0x7f // zigzag -64 objects
				return b
			}},
		},
	})
}
